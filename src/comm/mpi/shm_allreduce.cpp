// ShmAllreduce: rank 0 allocates the window (per-rank progress counters, then kSlots chunk slots
// per rank); the header describes the pipeline. Each wait spins briefly, then sleeps on the futex
// of the counter it waits for; a rank that advances a counter wakes it only when someone sleeps.
#include "comm/mpi/shm_allreduce.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <exception>

#include <linux/futex.h>
#include <sched.h>
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
#include <type_traits>

#include "runtime/check.h"

namespace hpctrain {

// One rank's progress: chunks copied in, reduced and copied out since create() (mod 2^32), on a
// line only that rank writes; the sleepers' count on its own line. Process-shared futexes (no
// FUTEX_PRIVATE_FLAG): the window is MAP_SHARED.
struct ShmAllreduce::Header {
  alignas(64) std::atomic<uint32_t> done[3];  // kIn, kReduced, kOut
  alignas(64) std::atomic<uint32_t> sleepers;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex word must be a plain int");

namespace {

enum Stage { kIn = 0, kReduced = 1, kOut = 2 };
constexpr int64_t kSlotAlign = 4096;
constexpr int64_t kBlock = 2048;  // elements reduced at a time: the partial sum stays in L1
constexpr size_t kPrefetchBytes = 4096;

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

// Wrap-safe "counter has reached target" (counters run mod 2^32).
inline bool reached(uint32_t counter, uint32_t target) { return static_cast<int32_t>(counter - target) >= 0; }

// out = a op b, or out = out op b when a == nullptr. Fixed 16-element inner loops: GCC's -O2
// (very-cheap cost model) vectorizes only loops whose trip count is a multiple of the vector.
template <typename T, int Op>
void reduce_op(T* __restrict out, const T* __restrict a, const T* __restrict b, int64_t n) {
  auto f = [](T x, T y) { return Op == 0 ? x + y : Op == 1 ? std::max(x, y) : std::min(x, y); };
  int64_t i = 0;
  if (a) {
    for (; i + 16 <= n; i += 16)
      for (int j = 0; j < 16; ++j) out[i + j] = f(a[i + j], b[i + j]);
    for (; i < n; ++i) out[i] = f(a[i], b[i]);
  } else {
    for (; i + 16 <= n; i += 16)
      for (int j = 0; j < 16; ++j) out[i + j] = f(out[i + j], b[i + j]);
    for (; i < n; ++i) out[i] = f(out[i], b[i]);
  }
}

template <typename T>
void reduce(T* out, const T* a, const T* b, int64_t n, MPI_Op op) {
  if (op == MPI_SUM)
    reduce_op<T, 0>(out, a, b, n);
  else if (op == MPI_MAX)
    reduce_op<T, 1>(out, a, b, n);
  else
    reduce_op<T, 2>(out, a, b, n);
}

// 16-bit floats: out = the sum of ins[0..k) in rank order, accumulated in float32 and rounded
// once (as a float32 sum staged and narrowed would be, without the staging).
template <typename T>
void sum16(T* out, const T* const* ins, int k, int64_t n) {
  float acc[16];
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) acc[j] = static_cast<float>(ins[0][i + j]);
    for (int q = 1; q < k; ++q)
      for (int j = 0; j < 16; ++j) acc[j] += static_cast<float>(ins[q][i + j]);
    for (int j = 0; j < 16; ++j) out[i + j] = T(acc[j]);
  }
  for (; i < n; ++i) {
    float a = static_cast<float>(ins[0][i]);
    for (int q = 1; q < k; ++q) a += static_cast<float>(ins[q][i]);
    out[i] = T(a);
  }
}

template <typename T>
constexpr bool kIs16 = std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half>;

// PREFETCHW (x86-64: AMD since K8, Intel since Broadwell; a NOP on older cores): fetch the line
// for writing without storing to it.
inline void prefetch_write(void* p) {
#if defined(__x86_64__)
  asm volatile("prefetchw (%0)" ::"r"(p));
#else
  __builtin_prefetch(p, 1);
#endif
}

// memcpy into the shared window, announcing each next 4 KiB as a write ahead of time: the lines
// are usually held by a peer that read them last round, and a plain store waits for each
// invalidation in turn (measured: ~5% faster from 256 KiB up, two ranks).
void copy_to_shared(void* dst, const void* src, size_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  for (size_t i = 0; i < bytes; i += kPrefetchBytes) {
    for (size_t j = i + kPrefetchBytes; j < std::min(bytes, i + 2 * kPrefetchBytes); j += 64) prefetch_write(d + j);
    std::memcpy(d + i, s + i, std::min(kPrefetchBytes, bytes - i));
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
  s->chunk_ = std::max<int64_t>(128, chunk_bytes / 128 * 128);
  s->yield_ = size > sysconf(_SC_NPROCESSORS_ONLN);
  // Rank 0 allocates it all (headers, then kSlots slots per rank); the others map it.
  const int64_t head = (size * static_cast<int64_t>(sizeof(Header)) + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
  MPI_Aint bytes = s->rank_ == 0 ? head + static_cast<int64_t>(size) * kSlots * s->chunk_ : 0;
  void* base = nullptr;
  HPC_MPI_CHECK(MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, node, &base, &s->win_));
  MPI_Aint got = 0;
  int disp = 0;
  HPC_MPI_CHECK(MPI_Win_shared_query(s->win_, 0, &got, &disp, &base));
  char* p = static_cast<char*>(base);
  s->hdr_ = reinterpret_cast<Header*>(p);
  if (s->rank_ == 0) {
    for (int r = 0; r < size; ++r) {
      for (auto& d : s->hdr_[r].done) new (&d) std::atomic<uint32_t>(0);
      new (&s->hdr_[r].sleepers) std::atomic<uint32_t>(0);
    }
  }
  s->slots_ = p + head;
  HPC_MPI_CHECK(MPI_Barrier(node));  // headers initialized before anyone uses them
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

// This rank has finished `stage` of chunk seq - 1: publish it, and wake sleepers if there are any.
// seq_cst store and load pair with wait()'s seq_cst increment and load (no lost wake).
void ShmAllreduce::publish(int stage, uint32_t seq) {
  Header& h = hdr_[rank_];
  h.done[stage].store(seq, std::memory_order_seq_cst);
  if (h.sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_all(&h.done[stage]);
}

// Until every other rank has finished `stage` of chunk target - 1: spin up to kSpinMicros on
// each, then sleep on that rank's counter (it wakes us when it moves).
void ShmAllreduce::wait(int stage, uint32_t target) {
  std::chrono::steady_clock::time_point start{}, now;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    Header& h = hdr_[q];
    std::atomic<uint32_t>& word = h.done[stage];
    while (!reached(word.load(std::memory_order_acquire), target)) {
      now = std::chrono::steady_clock::now();
      if (start == std::chrono::steady_clock::time_point{}) start = now;  // one spin budget per wait
      if (now - start < std::chrono::microseconds(kSpinMicros)) {
        if (yield_ && now - start > std::chrono::microseconds(2)) {
          sched_yield();  // more ranks than CPUs: the peer may be waiting for this core
          continue;
        }
        for (int i = 0; i < 16; ++i) cpu_relax();
        continue;
      }
      h.sleepers.fetch_add(1, std::memory_order_seq_cst);
      uint32_t v = word.load(std::memory_order_seq_cst);
      if (!reached(v, target)) {
        ++sleeps_;
        futex_wait(&word, v);
      }
      h.sleepers.fetch_sub(1, std::memory_order_relaxed);
    }
  }
}

template <typename T>
bool ShmAllreduce::run(T* data, int64_t count, MPI_Op op) {
  const int64_t per_chunk = chunk_ / static_cast<int64_t>(sizeof(T));
  const int64_t chunks = (count + per_chunk - 1) / per_chunk;
  // Chunk c: elements [c * per_chunk, +n) of data, in slot (seq_ + c) % kSlots of every rank.
  // Rank q owns the 16-element aligned slice [q * slice, +slice) of it.
  auto slot_of = [&](int q, int64_t c) {
    return reinterpret_cast<T*>(slots_ + (q * int64_t{kSlots} + (seq_ + c) % kSlots) * chunk_);
  };
  auto geometry = [&](int64_t c, int q, T** chunk_data, T** slot, int64_t* n, int64_t* lo, int64_t* hi) {
    *chunk_data = data + c * per_chunk;
    *slot = slot_of(q, c);
    *n = std::min(per_chunk, count - c * per_chunk);
    const int64_t slice = ((*n + size_ - 1) / size_ + 15) / 16 * 16;
    *lo = std::min(*n, q * slice);
    *hi = std::min(*n, *lo + slice);
  };
  T *d, *slot;
  int64_t n, lo, hi;
  // Step i: copy in chunk i, reduce chunk i - 1, copy out chunk i - 2. Each wait is for what the
  // peers did a step earlier, so ranks in step rarely wait; the ring only bounds how far copy-in
  // runs ahead of everyone's copy-out.
  for (int64_t i = 0; i < chunks + 2; ++i) {
    if (i < chunks) {  // this rank's input, less its own slice (read in place), into its slot
      const uint32_t seq = static_cast<uint32_t>(seq_ + i);
      wait(kOut, seq - kSlots + 1);  // everyone is done with the slot's previous chunk
      geometry(i, rank_, &d, &slot, &n, &lo, &hi);
      copy_to_shared(slot, d, lo * sizeof(T));
      copy_to_shared(slot + hi, d + hi, (n - hi) * sizeof(T));
      publish(kIn, seq + 1);
    }
    if (i >= 1 && i <= chunks) {  // this rank's slice, in rank order, into its slot and its data
      const uint32_t seq = static_cast<uint32_t>(seq_ + i - 1);
      wait(kIn, seq + 1);
      geometry(i - 1, rank_, &d, &slot, &n, &lo, &hi);
      for (int64_t b = lo; b < hi; b += kBlock) {
        const int64_t m = std::min(kBlock, hi - b);
        T* out = slot + b;
        for (int64_t j = b + kBlock; j < std::min(hi, b + 2 * kBlock); j += 64 / int64_t{sizeof(T)})
          prefetch_write(slot + j);  // the next block's output, as in copy_to_shared
        auto in = [&](int q) -> const T* { return q == rank_ ? d + b : slot_of(q, i - 1) + b; };
        if constexpr (kIs16<T>) {  // sums only (sum_half)
          const T* ins[kMaxRanks16];
          for (int q = 0; q < size_; ++q) ins[q] = in(q);
          sum16<T>(out, ins, size_, m);
        } else {
          reduce<T>(out, in(0), in(1), m, op);
          for (int q = 2; q < size_; ++q) reduce<T>(out, nullptr, in(q), m, op);
        }
        std::memcpy(d + b, out, m * sizeof(T));
      }
      publish(kReduced, seq + 1);
    }
    if (i >= 2) {  // the other ranks' slices from their slots
      const uint32_t seq = static_cast<uint32_t>(seq_ + i - 2);
      wait(kReduced, seq + 1);
      for (int q = 0; q < size_; ++q) {
        if (q == rank_) continue;
        geometry(i - 2, q, &d, &slot, &n, &lo, &hi);
        std::memcpy(d + lo, slot + lo, (hi - lo) * sizeof(T));
      }
      publish(kOut, seq + 1);
    }
  }
  seq_ += chunks;
  return true;
}

bool ShmAllreduce::sum_half(uint16_t* data, int64_t count, c10::ScalarType dtype) {
  if ((dtype != c10::kBFloat16 && dtype != c10::kHalf) || size_ > kMaxRanks16) return false;
  if (count == 0) return true;
  if (dtype == c10::kBFloat16) return run(reinterpret_cast<c10::BFloat16*>(data), count, MPI_SUM);
  return run(reinterpret_cast<c10::Half*>(data), count, MPI_SUM);
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
