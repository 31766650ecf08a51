// Optional operations a backend may offer beside the collectives of comm/communicator.h. They
// are not collectives of the data-parallel algorithm: they serve diagnosis (link probes for the
// straggler report, diag/link_probe.h) and reports (the step quoted by the watchdog).
//
// Contract:
// - A backend opts in by also deriving from LinkProber and/or StepReporter (the MPI backend does
//   both, NCCL only StepReporter, the router forwards both). Test doubles implement neither.
// - link_prober(c) is that interface when `c` can send point-to-point messages, else nullptr.
// - report_step(c, step) forwards to StepReporter::set_step when `c` has one; a no-op otherwise.
#pragma once

#include <cstdint>
#include <string>

#include "comm/communicator.h"

namespace hpctrain {

class LinkProber {
 public:
  virtual ~LinkProber() = default;
  // False when the backend behind (a router's MPI lane, say) cannot send point-to-point.
  virtual bool can_probe_links() const { return true; }
  // Times this rank's outbound link to rank `to`: sends `bytes` there and waits for its one-byte
  // acknowledgement, while receiving `bytes` from rank `from` and acknowledging them (-1: no
  // such peer), `rounds` times back to back. Peers pair up: if r's `to` is t, t's `from` is r.
  // Every rank of the communicator submits it at the same point (in op order; ranks without
  // peers pass -1, -1). *seconds (written before the work completes): the fastest round, from
  // its start until `to`'s acknowledgement arrived; 0 without `to`. Not counted as collective
  // wait (comm/wait_meter.h).
  virtual WorkHandle probe_link(int to, int from, int64_t bytes, int rounds, double* seconds, std::string tag = {}) = 0;
};

class StepReporter {
 public:
  virtual ~StepReporter() = default;
  // The caller's current training step, quoted in watchdog reports ("... at step 120"). Cheap
  // (an atomic store); call it once per step.
  virtual void set_step(int64_t step) = 0;
};

inline LinkProber* link_prober(Communicator& c) {
  auto* p = dynamic_cast<LinkProber*>(&c);
  return p && p->can_probe_links() ? p : nullptr;
}

inline void report_step(Communicator& c, int64_t step) {
  if (auto* s = dynamic_cast<StepReporter*>(&c)) s->set_step(step);
}

}  // namespace hpctrain
