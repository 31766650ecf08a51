// ShmAllreduce: rank 0 allocates the window (header, one input slot per rank, one result slot).
// Per chunk: a futex-backed central barrier, each rank reduces its slice (16-element aligned)
// in rank order, a second barrier, then every rank copies the result out.
#include "comm/mpi/shm_allreduce.h"

#include <exception>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <string>

#include "runtime/check.h"

namespace hpctrain {

// The window's first cache lines: a central barrier (arrival count + generation word that the
// waiters sleep on). Process-shared futexes (no FUTEX_PRIVATE_FLAG): the window is MAP_SHARED.
struct ShmAllreduce::Header {
  alignas(64) std::atomic<uint32_t> arrived;
  alignas(64) std::atomic<uint32_t> generation;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex word must be a plain int");

namespace {

constexpr int64_t kHeaderBytes = 128;

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  timespec ts{0, 100 * 1000 * 1000};  // re-check every 100 ms (robust against a lost wake)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

template <typename T>
void reduce_into(T* out, const T* in, int64_t n, MPI_Op op) {
  if (op == MPI_SUM) {
    for (int64_t i = 0; i < n; ++i) out[i] += in[i];
  } else if (op == MPI_MAX) {
    for (int64_t i = 0; i < n; ++i) out[i] = std::max(out[i], in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = std::min(out[i], in[i]);
  }
}

bool enabled_by_env() {
  const char* v = std::getenv("HPCTRAIN_SHM_ALLREDUCE");
  return !(v && std::string(v) == "0");
}

}  // namespace

std::unique_ptr<ShmAllreduce> ShmAllreduce::create(MPI_Comm comm, int64_t chunk_bytes) {
  int size = 1, rank = 0;
  HPC_MPI_CHECK(MPI_Comm_size(comm, &size));
  HPC_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_Comm node;
  HPC_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  int node_size = 1;
  HPC_MPI_CHECK(MPI_Comm_size(node, &node_size));
  // Every rank must take the same path: agree on "all on one node and enabled everywhere".
  int ok = (node_size == size && size > 1 && enabled_by_env()) ? 1 : 0, all_ok = 0;
  HPC_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm));
  if (!all_ok) {
    HPC_MPI_CHECK(MPI_Comm_free(&node));
    return nullptr;
  }
  std::unique_ptr<ShmAllreduce> s(new ShmAllreduce());
  s->node_ = node;
  HPC_MPI_CHECK(MPI_Comm_rank(node, &s->rank_));  // == rank (key = rank, same members)
  s->size_ = size;
  s->chunk_ = std::max<int64_t>(64, chunk_bytes / 64 * 64);
  // Rank 0 allocates it all (header, N input slots, result); the others map it.
  MPI_Aint bytes = s->rank_ == 0 ? kHeaderBytes + (size + 1) * s->chunk_ : 0;
  void* base = nullptr;
  HPC_MPI_CHECK(MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, node, &base, &s->win_));
  MPI_Aint got = 0;
  int disp = 0;
  HPC_MPI_CHECK(MPI_Win_shared_query(s->win_, 0, &got, &disp, &base));
  char* p = static_cast<char*>(base);
  s->hdr_ = reinterpret_cast<Header*>(p);
  if (s->rank_ == 0) {
    new (&s->hdr_->arrived) std::atomic<uint32_t>(0);
    new (&s->hdr_->generation) std::atomic<uint32_t>(0);
  }
  s->slots_ = p + kHeaderBytes;
  s->result_ = s->slots_ + size * s->chunk_;
  HPC_MPI_CHECK(MPI_Barrier(node));  // header initialized before anyone uses it
  return s;
}

ShmAllreduce::~ShmAllreduce() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (fin) return;
  // Unwinding from an error on this rank: MPI_Win_free is collective and the peers may be waiting
  // in a collective this rank will never join, so freeing would hang this rank until the
  // watchdog fires instead of reaching the error line and MPI_Abort. The process is ending.
  if (std::uncaught_exceptions() > 0) return;
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

// Central barrier: the last rank to arrive resets the count, bumps the generation and wakes
// the sleepers; the others spin briefly, then sleep on the generation word.
void ShmAllreduce::barrier() {
  uint32_t gen = hdr_->generation.load(std::memory_order_acquire);
  if (hdr_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(size_)) {
    hdr_->arrived.store(0, std::memory_order_relaxed);
    hdr_->generation.store(gen + 1, std::memory_order_release);
    futex_wake_all(&hdr_->generation);
    return;
  }
  auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
  while (hdr_->generation.load(std::memory_order_acquire) == gen) {
    if (std::chrono::steady_clock::now() < until) {
      for (int i = 0; i < 16; ++i) cpu_relax();
      continue;
    }
    ++sleeps_;
    futex_wait(&hdr_->generation, gen);
  }
}

template <typename T>
bool ShmAllreduce::run(T* data, int64_t count, MPI_Op op) {
  const int64_t per_chunk = chunk_ / static_cast<int64_t>(sizeof(T));
  for (int64_t off = 0; off < count; off += per_chunk) {
    const int64_t n = std::min(per_chunk, count - off);
    std::memcpy(slots_ + rank_ * chunk_, data + off, n * sizeof(T));
    barrier();  // every input is in its slot
    // This rank's slice, aligned to 16 elements: [lo, hi).
    const int64_t step = (n + size_ - 1) / size_;
    const int64_t slice = (step + 15) / 16 * 16;
    const int64_t lo = std::min(n, rank_ * slice), hi = std::min(n, lo + slice);
    if (hi > lo) {
      T* out = reinterpret_cast<T*>(result_) + lo;
      std::memcpy(out, reinterpret_cast<const T*>(slots_) + lo, (hi - lo) * sizeof(T));
      for (int r = 1; r < size_; ++r)
        reduce_into(out, reinterpret_cast<const T*>(slots_ + r * chunk_) + lo, hi - lo, op);
    }
    barrier();  // the whole chunk is reduced; the next chunk's first barrier keeps the result
                // until every rank has copied it out
    std::memcpy(data + off, result_, n * sizeof(T));
  }
  return true;
}

bool ShmAllreduce::allreduce(void* data, int64_t count, MPI_Datatype type, MPI_Op op) {
  if (op != MPI_SUM && op != MPI_MAX && op != MPI_MIN) return false;
  if (count == 0) return true;
  if (type == MPI_FLOAT) return run(static_cast<float*>(data), count, op);
  if (type == MPI_DOUBLE) return run(static_cast<double*>(data), count, op);
  if (type == MPI_INT32_T) return run(static_cast<int32_t*>(data), count, op);
  if (type == MPI_INT64_T) return run(static_cast<int64_t*>(data), count, op);
  return false;
}

}  // namespace hpctrain
