// EventFileWriter: Event protobufs framed as TFRecords into a stdio file opened with O_EXCL (a
// taken name gets a numeric suffix, never reused); the first failed write is kept in error_
// and every later call does nothing.
#include "metrics/event_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "metrics/tensorboard_event.pb.h"
#include "metrics/tfrecord.h"
#include "runtime/check.h"

namespace hpctrain {
namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || !buf[0]) return "localhost";
  return buf;
}

tb::Event make_event(int64_t step) {
  tb::Event e;
  e.set_wall_time(now_s());
  e.set_step(step);
  return e;
}

}  // namespace

EventFileWriter::EventFileWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw Error("--tensorboard " + dir +
                ": cannot create the directory: " + (ec ? ec.message() : std::string("a file of that name exists")));
  std::string base =
      dir + "/events.out.tfevents." + std::to_string(static_cast<long long>(now_s())) + "." + host_name();
  // O_EXCL: a name taken by an earlier run (same second, same host) gets a suffix instead.
  int fd = -1;
  for (int n = 0; fd < 0 && n < 1000; ++n) {
    path_ = n ? base + "." + std::to_string(n) : base;
    fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0 || !(file_ = ::fdopen(fd, "wb"))) {
    std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw Error("--tensorboard " + dir + ": cannot create " + path_ + ": " + why);
  }
  tb::Event e = make_event(0);
  e.set_file_version("brain.Event:2");
  append(e.SerializeAsString());
  if (!flush()) throw Error("--tensorboard " + dir + ": " + error_);
}

EventFileWriter::~EventFileWriter() {
  if (file_) std::fclose(file_);
}

void EventFileWriter::fail(const std::string& what) {
  if (error_.empty()) error_ = what + " " + path_ + ": " + std::strerror(errno);
}

void EventFileWriter::append(const std::string& serialized_event) {
  if (!ok()) return;
  std::string rec = tfrecord_frame(serialized_event);
  errno = 0;
  if (std::fwrite(rec.data(), 1, rec.size(), file_) != rec.size()) fail("cannot write");
}

bool EventFileWriter::flush() {
  if (!ok()) return false;
  errno = 0;
  if (std::fflush(file_) != 0) fail("cannot write");
  return ok();
}

void EventFileWriter::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  if (values.empty()) return;
  tb::Event e = make_event(step);
  for (const auto& [tag, v] : values) {
    tb::Summary::Value* sv = e.mutable_summary()->add_value();
    sv->set_tag(tag);
    sv->set_simple_value(static_cast<float>(v));
  }
  append(e.SerializeAsString());
}

void EventFileWriter::text(int64_t step, const std::string& tag, const std::string& markdown) {
  tb::Event e = make_event(step);
  tb::Summary::Value* sv = e.mutable_summary()->add_value();
  sv->set_tag(tag);
  sv->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  tb::TensorProto* t = sv->mutable_tensor();
  t->set_dtype(tb::DT_STRING);
  t->mutable_tensor_shape()->add_dim()->set_size(1);
  t->add_string_val(markdown);
  append(e.SerializeAsString());
}

void EventFileWriter::session_start(int64_t step) {
  tb::Event e = make_event(step);
  e.mutable_session_log()->set_status(tb::SessionLog::START);
  append(e.SerializeAsString());
}

}  // namespace hpctrain
