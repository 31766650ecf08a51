// CallerWaits: a scope in which the calling thread waits for every collective it submits at
// once (a synchronous call: SyncBatchNorm, metric reductions, `hpctrain bench`).
//
// Contract:
// - Only a hint about when a collective is needed; it changes no result and no order. Inside
//   the scope a backend with a progress thread (the MPI backend's CommThread) may leave that
//   thread asleep and run the collective on the caller when it waits, saving a wake-up of the
//   progress thread and the caller's own sleep (with more threads than cores, each one a wait
//   for a core).
// - A collective submitted in the scope and not waited for in it is started when the scope ends
//   (so leaving one unwaited delays it to the end of the scope, never forever).
// - Scopes nest; per thread. Do not hold one around code that waits for another rank by other
//   means (an MPI call of its own, a file another rank writes) while a collective it submitted
//   is still unwaited.
// - DDP's buckets are submitted outside any scope: they must start while backward goes on.
#pragma once

namespace hpctrain {

class CallerWaits {
 public:
  CallerWaits();
  ~CallerWaits();
  CallerWaits(const CallerWaits&) = delete;
  CallerWaits& operator=(const CallerWaits&) = delete;

  // True inside a scope on this thread.
  static bool active();
  // For backends: `start(arg)` starts what was left unstarted under the hint; it runs when the
  // outermost scope ends, or at once when another backend defers (one slot per thread).
  static void defer(void (*start)(void*), void* arg);
  // For backends: forgets a deferral of `arg` (its owner is going away).
  static void forget(void* arg);
};

}  // namespace hpctrain
