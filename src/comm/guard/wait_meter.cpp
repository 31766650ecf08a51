#include "comm/guard/wait_meter.h"

namespace hpctrain {

CollectiveWaitMeter& CollectiveWaitMeter::get() {
  static CollectiveWaitMeter m;
  return m;
}

void CollectiveWaitMeter::add(double seconds) {
  if (!enabled() || seconds < 0) return;
  ns_.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace hpctrain
