// What `doctor` reports about the network between hosts: the MPI transport settings in effect
// and a point-to-point bandwidth/latency measurement for every pair of hosts, so that a
// misconfigured interface (traffic on a slow management NIC, or on IPoIB instead of verbs) is
// visible at once.
//
// Contract:
// - measure_host_pairs() is collective over `comm`. Hosts are the shared-memory domains
//   (MPI_COMM_TYPE_SHARED); each host's lowest rank is its leader. For every pair of hosts
//   (a < b, in order of their leaders' ranks), the two leaders ping-pong `bytes` `iters` times
//   (MPI_Sendrecv); every rank returns the same rows (broadcast from rank 0). One host: no rows.
// - mpi_transport_settings() reads the MPI library's own control variables (MPI_T: pml, btl,
//   btl_tcp_if_include, btl_tcp_if_exclude, btl_tcp_links, oob_tcp_if_include; string and int
//   variables) and describes them in one line, e.g. "pml=(default), ..., btl_tcp_links=2";
//   names the library does not have are left out. Local, not collective.
// - ipv4_interfaces() lists this host's up, non-loopback IPv4 interfaces as "name=addr".
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

struct HostPairBandwidth {
  std::string host_a, host_b;
  int rank_a = 0, rank_b = 0;  // the leaders that measured it
  int64_t bytes = 0;
  double GBps = 0;        // bytes / (round trip time / 2), median round
  double latency_us = 0;  // half the median round trip of a 1-byte message
};

std::vector<HostPairBandwidth> measure_host_pairs(MPI_Comm comm, int64_t bytes, int iters);
std::string mpi_transport_settings();
std::vector<std::string> ipv4_interfaces();

}  // namespace hpctrain
