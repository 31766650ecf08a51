// Host-pair measurements: the hosts' leaders (local rank 0) ping-pong pair by pair over a
// communicator of their own; idle ranks wait in an MPI_Ibcast polled with 500 us sleeps, so
// they leave the cores to the two that measure. Transport settings come from MPI_T cvars.
#include "diag/host_pairs.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "runtime/check.h"

namespace hpctrain {
namespace {

constexpr int kTag = 7301;

// Median over `iters` round trips of `bytes` between this rank and `peer`; `first` sends first.
double median_round_trip_s(MPI_Comm comm, int peer, bool first, std::vector<char>& buf, int iters) {
  std::vector<double> t;
  const int n = static_cast<int>(buf.size());
  for (int i = 0; i < iters + 1; ++i) {  // the first round warms the connection up
    double t0 = MPI_Wtime();
    if (first) {
      HPC_MPI_CHECK(MPI_Send(buf.data(), n, MPI_BYTE, peer, kTag, comm));
      HPC_MPI_CHECK(MPI_Recv(buf.data(), n, MPI_BYTE, peer, kTag, comm, MPI_STATUS_IGNORE));
    } else {
      HPC_MPI_CHECK(MPI_Recv(buf.data(), n, MPI_BYTE, peer, kTag, comm, MPI_STATUS_IGNORE));
      HPC_MPI_CHECK(MPI_Send(buf.data(), n, MPI_BYTE, peer, kTag, comm));
    }
    if (i > 0) t.push_back(MPI_Wtime() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// A broadcast that waits without spinning: ranks idle during a measurement must leave the cores
// to the two that measure (ranks of several hosts may share a machine's cores).
void quiet_bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  MPI_Request req;
  HPC_MPI_CHECK(MPI_Ibcast(buf, count, type, root, comm, &req));
  for (int done = 0;;) {
    HPC_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

std::string cvar_string(const char* name) {
  int index = -1;
  if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) return "";
  char vname[256], desc[1024];
  int name_len = sizeof(vname), desc_len = sizeof(desc), verbosity = 0, bind = 0, scope = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_T_enum enumtype;
  if (MPI_T_cvar_get_info(index, vname, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind, &scope) !=
      MPI_SUCCESS)
    return "";
  const bool is_int = type == MPI_INT || type == MPI_UNSIGNED;  // Open MPI's int and unsigned int variables
  if (!is_int && type != MPI_CHAR) return "";
  MPI_T_cvar_handle h;
  int count = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &h, &count) != MPI_SUCCESS) return "";
  std::string out;
  if (is_int && count == 1) {
    int v = 0;
    if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS)
      out = type == MPI_INT ? std::to_string(v) : std::to_string(static_cast<unsigned>(v));
  } else if (!is_int) {
    std::vector<char> v(std::max(count, 1) + 1, '\0');
    if (MPI_T_cvar_read(h, v.data()) == MPI_SUCCESS) out = v.data();
  }
  MPI_T_cvar_handle_free(&h);
  return out;
}

}  // namespace

std::vector<HostPairBandwidth> measure_host_pairs(MPI_Comm comm, int64_t bytes, int iters) {
  int rank = 0;
  HPC_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_Comm local;
  HPC_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local));
  int local_rank = 0;
  HPC_MPI_CHECK(MPI_Comm_rank(local, &local_rank));
  HPC_MPI_CHECK(MPI_Comm_free(&local));
  MPI_Comm leaders;
  HPC_MPI_CHECK(MPI_Comm_split(comm, local_rank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders));

  std::vector<double> flat;  // per pair: rank_a, rank_b, GBps, latency_us
  std::vector<char> names;   // per leader: 256 bytes of hostname
  int hosts = 0;
  if (leaders != MPI_COMM_NULL) {
    int me = 0;
    HPC_MPI_CHECK(MPI_Comm_rank(leaders, &me));
    HPC_MPI_CHECK(MPI_Comm_size(leaders, &hosts));
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    names.resize(256 * static_cast<size_t>(hosts));
    HPC_MPI_CHECK(MPI_Allgather(host, 256, MPI_CHAR, names.data(), 256, MPI_CHAR, leaders));
    std::vector<int> world_ranks(hosts);
    HPC_MPI_CHECK(MPI_Allgather(&rank, 1, MPI_INT, world_ranks.data(), 1, MPI_INT, leaders));
    std::vector<char> big(static_cast<size_t>(bytes)), tiny(1);
    for (int a = 0; a < hosts; ++a)
      for (int b = a + 1; b < hosts; ++b) {
        double gbps = 0, lat = 0;
        if (me == a || me == b) {
          int peer = me == a ? b : a;
          double rt = median_round_trip_s(leaders, peer, me == a, big, iters);
          double rt1 = median_round_trip_s(leaders, peer, me == a, tiny, iters);
          gbps = static_cast<double>(bytes) / (rt / 2) / 1e9;
          lat = rt1 / 2 * 1e6;
        }
        // Host a's leader measured; everyone takes its numbers.
        double row[2] = {gbps, lat};
        quiet_bcast(row, 2, MPI_DOUBLE, a, leaders);
        flat.insert(flat.end(), {double(world_ranks[a]), double(world_ranks[b]), row[0], row[1]});
      }
    HPC_MPI_CHECK(MPI_Comm_free(&leaders));
  }
  // Rank 0 is host 0's leader: it has everything; the other ranks get it from rank 0 (and the
  // non-leaders wait here, quietly, while the leaders measure).
  quiet_bcast(&hosts, 1, MPI_INT, 0, comm);
  const int pairs = hosts * (hosts - 1) / 2;
  flat.resize(4 * static_cast<size_t>(pairs));
  names.resize(256 * static_cast<size_t>(hosts));
  if (pairs > 0) {
    HPC_MPI_CHECK(MPI_Bcast(flat.data(), 4 * pairs, MPI_DOUBLE, 0, comm));
    HPC_MPI_CHECK(MPI_Bcast(names.data(), 256 * hosts, MPI_CHAR, 0, comm));
  }
  std::vector<HostPairBandwidth> out;
  int k = 0;
  for (int a = 0; a < hosts; ++a)
    for (int b = a + 1; b < hosts; ++b, ++k) {
      HostPairBandwidth r;
      r.host_a = std::string(&names[256 * a]);
      r.host_b = std::string(&names[256 * b]);
      r.rank_a = static_cast<int>(flat[4 * k]);
      r.rank_b = static_cast<int>(flat[4 * k + 1]);
      r.bytes = bytes;
      r.GBps = flat[4 * k + 2];
      r.latency_us = flat[4 * k + 3];
      out.push_back(r);
    }
  return out;
}

std::string mpi_transport_settings() {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return "MPI_T unavailable";
  std::string out;
  for (const char* name :
       {"pml", "btl", "btl_tcp_if_include", "btl_tcp_if_exclude", "btl_tcp_links", "oob_tcp_if_include"}) {
    int index = -1;
    if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) continue;
    std::string v = cvar_string(name);
    if (!out.empty()) out += ", ";
    out += std::string(name) + "=" + (v.empty() ? "(default)" : v);
  }
  MPI_T_finalize();
  return out.empty() ? "no MPI_T control variables" : out;
}

std::vector<std::string> ipv4_interfaces() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP)) continue;
    char addr[INET_ADDRSTRLEN] = {0};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, addr, sizeof(addr));
    out.push_back(std::string(i->ifa_name) + "=" + addr);
  }
  freeifaddrs(list);
  return out;
}

}  // namespace hpctrain
