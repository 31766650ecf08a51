// Optional operations a backend may offer beside the collectives of comm/communicator.h. They
// are not collectives of the data-parallel algorithm: they serve diagnosis (link probes for the
// straggler report, diag/link_probe.h). (The step quoted in watchdog reports is process-wide:
// comm/guard/op_guard.h, set_current_step.)
//
// Contract:
// - A backend opts in by also deriving from LinkProber (the MPI backend does, the router
//   forwards it). Test doubles need not.
// - link_prober(c) is that interface when `c` can send point-to-point messages, else nullptr.
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
  // wait (comm/guard/wait_meter.h).
  virtual WorkHandle probe_link(int to, int from, int64_t bytes, int rounds, double* seconds, std::string tag = {}) = 0;
};

inline LinkProber* link_prober(Communicator& c) {
  auto* p = dynamic_cast<LinkProber*>(&c);
  return p && p->can_probe_links() ? p : nullptr;
}

}  // namespace hpctrain
