// Wall-clock helpers shared by every stage (steady clock: immune to clock changes).
#pragma once

#include <chrono>

namespace hpctrain {

// Seconds elapsed since `t0` on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace hpctrain
