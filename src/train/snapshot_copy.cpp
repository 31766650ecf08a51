// SnapshotCopies (train/snapshot_copy.h): the ring of snapshot copies between hosts. Messages on
// the copies' own communicator: a header (tag kHead, JSON: the step and each file's name and
// size, or "done"), the files' bytes (kData, pieces of at most 1 GiB), and the receiver's
// acknowledgement (kAck: 0 committed, 1 failed). Every wait polls, so nothing blocks for ever.
#include "train/snapshot_copy.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <utility>

#include "ckpt/snapshot_slots.h"
#include "runtime/check.h"
#include "runtime/threads.h"
#include "runtime/world.h"

namespace hpctrain {

namespace fs = std::filesystem;

namespace {

constexpr int kHead = 1, kData = 2, kAck = 3;
constexpr int64_t kPiece = int64_t{1} << 30;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string read_whole(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error("cannot read " + p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::vector<int> snapshot_ring_partners(const std::vector<std::string>& hosts) {
  std::vector<std::string> order;                 // hosts by their lowest rank
  std::map<std::string, std::vector<int>> ranks;  // host -> its ranks, ascending
  for (size_t r = 0; r < hosts.size(); ++r) {
    if (!ranks.count(hosts[r])) order.push_back(hosts[r]);
    ranks[hosts[r]].push_back(static_cast<int>(r));
  }
  std::vector<int> partner(hosts.size(), -1);
  if (order.size() < 2) return partner;
  for (size_t h = 0; h < order.size(); ++h) {
    const std::vector<int>& mine = ranks[order[h]];
    const std::vector<int>& next = ranks[order[(h + 1) % order.size()]];
    for (size_t i = 0; i < mine.size(); ++i) partner[static_cast<size_t>(mine[i])] = next[i % next.size()];
  }
  return partner;
}

std::string snapshot_copy_dir_name(int rank) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "copy-of-rank-%05d", rank);
  return buf;
}

std::vector<std::string> snapshot_host_names(World& world) {
  char host[256] = {};
  std::snprintf(host, sizeof host, "%s", world.hostname().c_str());
  std::vector<char> all(static_cast<size_t>(world.size()) * sizeof host);
  HPC_MPI_CHECK(MPI_Allgather(host, sizeof host, MPI_CHAR, all.data(), sizeof host, MPI_CHAR, world.mpi_comm()));
  std::vector<std::string> hosts;
  for (int r = 0; r < world.size(); ++r) hosts.emplace_back(all.data() + static_cast<size_t>(r) * sizeof host);
  return hosts;
}

SnapshotCopies::SnapshotCopies(World& world, std::vector<std::string> hosts, std::string job_dir, int nice)
    : dir_(std::move(job_dir)), hosts_(std::move(hosts)), rank_(world.rank()), nice_(nice) {
  const std::vector<int> partners = snapshot_ring_partners(hosts_);
  partner_ = partners[static_cast<size_t>(rank_)];
  for (int r = 0; r < world.size(); ++r)
    if (partners[static_cast<size_t>(r)] == rank_) sources_.push_back(r);
  HPC_MPI_CHECK(MPI_Comm_dup(world.mpi_comm(), &comm_));
  if (!sources_.empty()) receiver_ = std::thread([this] { receive_loop(); });
}

SnapshotCopies::~SnapshotCopies() {
  abandon_ = true;
  if (receiver_.joinable()) receiver_.join();
}

bool SnapshotCopies::wait_request(MPI_Request& req, double deadline_s) {
  for (;;) {
    int flag = 0;
    HPC_MPI_CHECK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    if (flag) return true;
    if (abandon_ || now_s() > deadline_s) return false;  // the request is left behind: the job is ending
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void SnapshotCopies::send(int64_t step, const std::string& step_dir) {
  if (partner_ < 0) return;
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& e : fs::directory_iterator(step_dir))
    if (e.is_regular_file()) files.emplace_back(e.path().filename().string(), read_whole(e.path()));
  std::sort(files.begin(), files.end());
  nlohmann::json h = {{"step", step}, {"files", nlohmann::json::array()}};
  for (const auto& [name, bytes] : files) h["files"].push_back({name, bytes.size()});
  const std::string head = h.dump();
  const double never = 1e300;
  MPI_Request req;
  HPC_MPI_CHECK(MPI_Isend(head.data(), static_cast<int>(head.size()), MPI_CHAR, partner_, kHead, comm_, &req));
  if (!wait_request(req, never)) return;
  for (const auto& [name, bytes] : files)
    for (int64_t off = 0, n = static_cast<int64_t>(bytes.size()); off < n; off += kPiece) {
      const int piece = static_cast<int>(std::min(n - off, kPiece));
      HPC_MPI_CHECK(MPI_Isend(bytes.data() + off, piece, MPI_BYTE, partner_, kData, comm_, &req));
      if (!wait_request(req, never)) return;
    }
  int ack = 1;
  HPC_MPI_CHECK(MPI_Irecv(&ack, 1, MPI_INT, partner_, kAck, comm_, &req));
  if (!wait_request(req, never)) return;
  if (ack != 0)
    throw Error("the copy of snapshot step " + std::to_string(step) + " on rank " + std::to_string(partner_) +
                " (host " + hosts_[static_cast<size_t>(partner_)] + ") failed there");
}

void SnapshotCopies::receive_loop() {
  lower_this_thread_priority(nice_);
  try {
    while (!abandon_ && done_from_ < static_cast<int>(sources_.size())) {
      int flag = 0;
      MPI_Status st;
      HPC_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kHead, comm_, &flag, &st));
      if (!flag) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      int n = 0;
      HPC_MPI_CHECK(MPI_Get_count(&st, MPI_CHAR, &n));
      const int src = st.MPI_SOURCE;
      std::string head(static_cast<size_t>(n), '\0');
      HPC_MPI_CHECK(MPI_Recv(head.data(), n, MPI_CHAR, src, kHead, comm_, MPI_STATUS_IGNORE));
      const nlohmann::json h = nlohmann::json::parse(head);
      if (h.value("done", false)) {
        ++done_from_;
        continue;
      }
      std::vector<std::pair<std::string, std::string>> files;
      for (const auto& f : h["files"]) {
        files.emplace_back(f[0].get<std::string>(), std::string(f[1].get<size_t>(), '\0'));
        std::string& bytes = files.back().second;
        for (int64_t off = 0, total = static_cast<int64_t>(bytes.size()); off < total; off += kPiece) {
          const int piece = static_cast<int>(std::min(total - off, kPiece));
          MPI_Request req;
          HPC_MPI_CHECK(MPI_Irecv(bytes.data() + off, piece, MPI_BYTE, src, kData, comm_, &req));
          if (!wait_request(req, 1e300)) return;
        }
      }
      int ack = 0;
      const int64_t step = h["step"].get<int64_t>();
      try {
        commit_snapshot_files((fs::path(dir_) / snapshot_copy_dir_name(src)).string(), step, files);
      } catch (const std::exception& e) {
        ack = 1;
        std::lock_guard<std::mutex> lock(mu_);
        if (error_.empty())
          error_ = "copy of rank " + std::to_string(src) + "'s snapshot step " + std::to_string(step) + ": " + e.what();
      }
      files.clear();
      MPI_Request req;
      HPC_MPI_CHECK(MPI_Isend(&ack, 1, MPI_INT, src, kAck, comm_, &req));
      if (!wait_request(req, 1e300)) return;
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.empty()) error_ = std::string("snapshot copies: ") + e.what();
    std::fprintf(stderr, "hpctrain: rank %d: WARNING: snapshot copies stopped: %s\n", rank_, e.what());
  }
}

void SnapshotCopies::finish(double timeout_s) {
  if (finished_ || partner_ < 0) return;
  finished_ = true;
  const double deadline = now_s() + timeout_s;
  const std::string done = R"({"done":true})";
  MPI_Request req;
  HPC_MPI_CHECK(MPI_Isend(done.data(), static_cast<int>(done.size()), MPI_CHAR, partner_, kHead, comm_, &req));
  const bool sent = wait_request(req, deadline);
  while (receiver_.joinable() && done_from_ < static_cast<int>(sources_.size()) && now_s() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const bool clean = sent && done_from_ >= static_cast<int>(sources_.size());
  if (!clean) {
    std::fprintf(stderr,
                 "hpctrain: rank %d: WARNING: snapshot copies: no \"done\" from every peer within %.0f s; "
                 "leaving them\n",
                 rank_, timeout_s);
    abandon_ = true;
  }
  if (receiver_.joinable()) receiver_.join();
  if (clean) MPI_Comm_free(&comm_);
}

std::string SnapshotCopies::take_error() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(error_, std::string());
}

}  // namespace hpctrain
