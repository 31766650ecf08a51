// SnapshotCopies: under ZeRO each rank's snapshot holds only its own shard, so a
// lost host would take its ranks' shards with it; every rank therefore also sends each committed
// snapshot to one rank on the next host in a ring, which keeps it in its own host's snapshot
// directory. Private to src/train (SnapshotSession owns one).
//
// The ring: hosts ordered by their lowest rank; rank r (the i-th rank of its host) sends to the
// (i mod n)-th rank of the next host (n: that host's ranks). One host: no copies (on() false).
// The copy of rank r lands in JOBDIR/copy-of-rank-RRRRR/step-NNNNNNNN on the receiver's host,
// with the slots' discipline (ckpt/snapshot_slots.h commit_snapshot_files: at most two steps,
// the previous kept until the next is begun).
//
// Contract:
// - Constructor: collective over world.mpi_comm() (dups a communicator of its own: the copies
//   use it from two threads, MPI_THREAD_MULTIPLE); `hosts` from snapshot_host_names(); starts the receiver thread when
//   this rank has sources. Both threads that use it (the slots' writer, in send(), and the receiver) run at nice value
//   `nice` (--snapshot-nice; 19: idle time only) and touch no other communicator, so gradient collectives never wait
//   for a copy (on a host with fewer cores than busy threads they still share the cores).
// - send(): on the snapshot writer's thread, after the commit: the step directory's files
//   (manifest.json and the shard, already checksummed) to the partner, then waits until the
//   partner has committed them (an acknowledgement), so the writer's "busy" covers the copy.
//   Throws hpctrain::Error on a failure the partner reports.
// - finish(): after the last send(): tells the partner "done", then waits until every source
//   has said "done", at most `timeout_s`, never forever (a peer that died ends the job anyway).
// - The destructor abandons whatever is in flight (polling loops, no blocking MPI call waits).
#pragma once

#include <mpi.h>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hpctrain {

class World;

// Collective: every rank's host name, by rank.
std::vector<std::string> snapshot_host_names(World& world);

// Pure: the partner (rank) of each rank given every rank's host name, -1 for all with one host.
std::vector<int> snapshot_ring_partners(const std::vector<std::string>& hosts);

// "copy-of-rank-00003"
std::string snapshot_copy_dir_name(int rank);

// Collective over `comm`: `st` sent from `root` to the others (a JSON header: meta, names,
// dtypes, shapes; then each tensor's bytes in pieces of at most 1 GiB). snapshot_resume.cpp.
struct CheckpointState;
void snapshot_broadcast_state(CheckpointState& st, int root, MPI_Comm comm);

class SnapshotCopies {
 public:
  SnapshotCopies(World& world, std::vector<std::string> hosts, std::string job_dir, int nice);
  ~SnapshotCopies();
  SnapshotCopies(const SnapshotCopies&) = delete;
  SnapshotCopies& operator=(const SnapshotCopies&) = delete;

  bool on() const { return partner_ >= 0; }
  void abandon() { abandon_ = true; }  // every wait in flight returns (the job is ending)

  void send(int64_t step, const std::string& step_dir);
  void finish(double timeout_s);
  std::string take_error();  // the receiver's first failure ("" if none)

 private:
  void receive_loop();
  bool wait_request(MPI_Request& req, double deadline_s);  // false: abandoned or past the deadline

  std::string dir_;
  std::vector<std::string> hosts_;
  int rank_ = 0, partner_ = -1, nice_ = 19;
  std::vector<int> sources_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::atomic<bool> abandon_{false};
  std::atomic<int> done_from_{0};
  std::mutex mu_;
  std::string error_;
  std::thread receiver_;
  bool finished_ = false;
};

}  // namespace hpctrain
