// CallerWaits: a per-thread depth and one deferred start (comm/caller_waits.h).
#include "comm/caller_waits.h"

namespace hpctrain {
namespace {
thread_local int t_depth = 0;
thread_local void (*t_start)(void*) = nullptr;
thread_local void* t_arg = nullptr;

void run_deferred() {
  auto* start = t_start;
  void* arg = t_arg;
  t_start = nullptr;
  t_arg = nullptr;
  if (start) start(arg);
}
}  // namespace

CallerWaits::CallerWaits() { ++t_depth; }

CallerWaits::~CallerWaits() {
  if (--t_depth == 0) run_deferred();
}

bool CallerWaits::active() { return t_depth > 0; }

void CallerWaits::defer(void (*start)(void*), void* arg) {
  if (t_start && (t_start != start || t_arg != arg)) run_deferred();
  t_start = start;
  t_arg = arg;
}

void CallerWaits::forget(void* arg) {
  if (t_arg == arg) t_start = nullptr, t_arg = nullptr;
}

}  // namespace hpctrain
