// error_line: what the user is shown of any exception, in one line. LibTorch's errors (c10::Error,
// TorchScript's included) lose their C++ backtrace and everything after the first line; a
// TorchScript error keeps its opening sentence plus its last line, the cause ("RuntimeError:
// ..."); "unknown error" when nothing is left. run_guarded (guard.h) and agree_on_failure /
// run_on_rank0 (agree.h) report through it. No LibTorch in this header.
#pragma once

#include <exception>
#include <string>

namespace hpctrain {

std::string error_line(const std::exception& e);

}  // namespace hpctrain
