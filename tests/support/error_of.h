// error_of(f): the what() of the exception (hpctrain::Error, CollectiveError, ...) that f
// throws, or "(no error)". For tests that check one-line error messages.
#pragma once

#include <functional>
#include <string>

#include "runtime/check.h"

namespace hpctrain::testing {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace hpctrain::testing
