# Decide whether the CUDA parts (NCCL backend, CUDA-tensor glue) are compiled.
# They are compiled whenever LibTorch was built with CUDA and NCCL headers and library are
# found, even on machines without a GPU: their tests skip at run time when no GPU is present.
set(HPCTRAIN_CUDA OFF)
if(HPCTRAIN_WITH_CUDA AND TARGET torch_cuda)
  # Prefer the NCCL that ships with the torch wheel (nvidia-nccl-cu*), which matches it.
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])"
    OUTPUT_VARIABLE _wheel_nccl OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  find_path(NCCL_INCLUDE_DIR nccl.h
    HINTS ${_wheel_nccl}/include ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
    HINTS ${_wheel_nccl}/lib ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(HPCTRAIN_CUDA ON)
    message(STATUS "hpctrain: CUDA LibTorch found; NCCL ${NCCL_LIBRARY} (headers ${NCCL_INCLUDE_DIR})")
  else()
    message(WARNING "hpctrain: CUDA LibTorch but no NCCL found; building without the NCCL backend")
  endif()
else()
  message(STATUS "hpctrain: building CPU-only (no CUDA LibTorch)")
endif()
