// LinkProbe: how long each host's outbound link takes to carry a fixed message, once per log
// interval, so the straggler report can name a slow link (metrics/straggler.h).
//
// Why a probe: a slow link makes every rank wait alike. Open MPI's allreduce (ring, or
// reduce-scatter + allgather) makes every rank's result depend on every rank's data, so all
// ranks leave a collective together however slowly one rank's data travels; only a rank that
// *arrives* late waits less. The waits inside collectives cannot tell which link is slow.
//
// Contract:
// - Ranks form a ring by rank. Rank r probes its link to r+1 (mod N) only when r+1 is on another
//   host, so each host boundary of the ring is probed once per interval, in one direction: r's
//   outbound link (a host's `tc` shaping is on its egress). Ranks on one host never send.
// - No rank sends while it must acknowledge (its acknowledgement would queue behind its own
//   probe on a slow egress and slow its neighbour's probe too): the ring is coloured (rank
//   parity; the last rank of an odd ring a third colour) and each colour sends in its own
//   phase, one probe_link op per phase on every rank.
// - run() is collective over the communicator (one probe_link op, in op order, on every rank)
//   when the job spans more than one host; with one host (or a backend without point-to-point)
//   it returns 0 at once and communicates nothing.
// - The message is kBytes (256 KiB: beyond MPI's eager limits, so it measures delivery, not a
//   socket buffer), two rounds back to back, the faster kept (start skew between ranks is paid
//   once). Cost per interval: 2 x 256 KiB per host boundary (0.4 ms on 10 GbE; 21 ms on a
//   200 Mbit/s link, the case it is there to find).
// - What it can see: a link that carries data slowly out of a host (rate limit, a bad cable
//   negotiating a lower speed, congestion). A delay alone lengthens the round trip of both
//   directions alike (TCP's window grows per round trip), so with two hosts it cannot say whose
//   link is delayed: that needs synchronised clocks.
// - The result (seconds, 0 for a rank that sends nothing) is this rank's; the interval
//   allreduce carries it to every rank (metrics/step_stats.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

class Communicator;

class LinkProbe {
 public:
  static constexpr int64_t kBytes = int64_t{256} << 10;
  static constexpr int kRounds = 2;

  // `hosts`: every rank's hostname, indexed by rank (empty: no probe).
  LinkProbe(const std::vector<std::string>& hosts, int rank, bool backend_can_probe);
  bool active() const { return active_; }
  // The rank this rank's outbound probe goes to (-1: none).
  int to() const { return to_; }
  double run(Communicator& comm);

 private:
  bool active_ = false;
  int to_ = -1, from_ = -1;
  int phases_ = 0, send_phase_ = -1, recv_phase_ = -1;
};

}  // namespace hpctrain
