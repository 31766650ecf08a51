// error_line (runtime/error_line.h): one line of any exception, LibTorch's without their backtrace.
#include <c10/util/Exception.h>

#include <exception>
#include <string>

#include "runtime/error_line.h"

namespace hpctrain {

std::string error_line(const std::exception& e) {
  auto* c10e = dynamic_cast<const c10::Error*>(&e);
  std::string msg = c10e ? c10e->what_without_backtrace() : e.what();
  // A TorchScript error opens with a fixed sentence and ends with the cause ("RuntimeError: ..."),
  // the interpreter's traceback in between: the sentence and the cause.
  std::string last;
  for (size_t at = 0; at < msg.size();) {
    size_t nl = msg.find('\n', at);
    if (nl == std::string::npos) nl = msg.size();
    if (msg.find_first_not_of(" \r", at) < nl) last = msg.substr(at, nl - at);
    at = nl + 1;
  }
  if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
  if (msg.rfind("The following operation failed in the TorchScript interpreter", 0) == 0 && !last.empty() &&
      last != msg)
    msg += " " + last.substr(last.find_first_not_of(' '));
  while (!msg.empty() && (msg.back() == '\r' || msg.back() == ' ')) msg.pop_back();
  return msg.empty() ? "unknown error" : msg;
}

}  // namespace hpctrain
