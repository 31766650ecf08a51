# src/metrics: TensorBoard event files, part of libhpctrain. Included from src/CMakeLists.txt
# after hpctrain_lib exists. The Event messages come from our own minimal .proto, compiled by
# Debian's protoc; protobuf is a PRIVATE dependency: no public header includes a .pb.h.
find_package(Protobuf REQUIRED)
file(GLOB HPCTRAIN_METRICS_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cpp)
target_sources(hpctrain_lib PRIVATE ${HPCTRAIN_METRICS_SOURCES} ${CMAKE_CURRENT_LIST_DIR}/tensorboard_event.proto)
# Generated into <build>/src/metrics/tensorboard_event.pb.{h,cc}; included as "metrics/...".
protobuf_generate(TARGET hpctrain_lib LANGUAGE cpp
  IMPORT_DIRS ${CMAKE_CURRENT_SOURCE_DIR}
  PROTOC_OUT_DIR ${CMAKE_CURRENT_BINARY_DIR})
target_include_directories(hpctrain_lib SYSTEM PRIVATE ${Protobuf_INCLUDE_DIRS})
target_link_libraries(hpctrain_lib PRIVATE protobuf::libprotobuf-lite)
