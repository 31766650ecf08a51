// LinkProbe: colours the ring of ranks (parity, a third colour for the last rank of an odd
// ring), so neighbours never share a phase; run() issues one probe_link op per phase and keeps
// the time of the phase in which this rank sends.
#include "diag/link_probe.h"

#include "comm/run_ops.h"
#include "runtime/check.h"

namespace hpctrain {

LinkProbe::LinkProbe(const std::vector<std::string>& hosts, int rank, bool backend_can_probe) {
  const int n = static_cast<int>(hosts.size());
  if (!backend_can_probe || n < 2 || rank < 0 || rank >= n) return;
  for (const std::string& h : hosts) active_ = active_ || h != hosts[0];
  if (!active_) return;
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  // Neighbours never share a colour, so no rank sends and acknowledges in one phase.
  auto colour = [n](int r) { return n % 2 == 1 && r == n - 1 ? 2 : r % 2; };
  phases_ = n % 2 == 1 ? 3 : 2;
  if (hosts[next] != hosts[rank]) to_ = next, send_phase_ = colour(rank);
  if (hosts[prev] != hosts[rank]) from_ = prev, recv_phase_ = colour(prev);
}

double LinkProbe::run(Communicator& comm) {
  if (!active_) return 0;
  LinkProber* prober = link_prober(comm);
  if (!prober) throw Error("the " + comm.name() + " backend cannot probe links (no point-to-point messages)");
  double mine = 0;
  for (int p = 0; p < phases_; ++p) {
    double seconds = 0;
    prober
        ->probe_link(p == send_phase_ ? to_ : -1, p == recv_phase_ ? from_ : -1, kBytes, kRounds, &seconds,
                     "straggler.link_probe")
        ->wait();
    if (p == send_phase_) mine = seconds;
  }
  return mine;
}

}  // namespace hpctrain
