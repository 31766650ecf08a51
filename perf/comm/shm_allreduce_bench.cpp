// Microbenchmark (not the product): ShmAllreduce::allreduce against bare MPI_Allreduce on the same
// buffer, one host, float32 sum, 64 KiB..64 MiB. Per size they run interleaved (shm, shm2, MPI,
// shm, shm2, MPI ...), each call timed between a barrier and its return; a call's time is the
// slowest rank's; the figure is the median. busbw = 2 (N-1)/N * bytes / time (the nccl-tests
// convention). ratio = MPI time / shm time (shm: the call right after an MPI_Allreduce); ratio2
// the same for shm2, the call right after a shm call (as in training, where every bucket's
// allreduce takes this path). sleeps counts both shm calls.
// Built standalone (no LibTorch): see perf/comm/shm_allreduce_bench.sh.
//
//   shmbench [--sizes-kib 64,256,...] [--iters-scale X] [--chunk BYTES]   time
//   shmbench --check [--chunk BYTES]                                       correctness only
//
// --check: every type and op, counts around slices, chunks and the pipeline's depth, random
// inputs per rank; on every rank the result must equal, bitwise, a reference reduced locally in
// rank order (in[0] op in[1] op ...) from all ranks' inputs (MPI_Allgather).
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/mpi/shm_allreduce.h"

namespace hpctrain {
// The library defines this in runtime/world.cpp (which needs more of the library).
void throw_mpi_error(int code, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + " code " +
                           std::to_string(code));
}
}  // namespace hpctrain

using hpctrain::ShmAllreduce;

namespace {

int g_rank = 0, g_size = 1;

template <typename T>
T apply(T a, T b, MPI_Op op) {
  if (op == MPI_SUM) return a + b;
  if (op == MPI_MAX) return std::max(a, b);
  return std::min(a, b);
}

template <typename T>
std::vector<T> random_input(int64_t n, int rank, int salt) {
  std::mt19937_64 rng(7919 * rank + salt);
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::normal_distribution<double> d(0.0, 1.0);  // fp sums depend on the order: bitwise needs rank order
    for (auto& x : v) x = static_cast<T>(d(rng) * (1 + rank));
  } else {
    std::uniform_int_distribution<int64_t> d(-1000000, 1000000);
    for (auto& x : v) x = static_cast<T>(d(rng));
  }
  return v;
}

template <typename T>
int check_one(ShmAllreduce& shm, int64_t n, MPI_Datatype type, MPI_Op op, int salt) {
  std::vector<T> mine = random_input<T>(n, g_rank, salt);
  std::vector<T> all(static_cast<size_t>(n) * g_size);
  MPI_Allgather(mine.data(), static_cast<int>(n * sizeof(T)), MPI_BYTE, all.data(), static_cast<int>(n * sizeof(T)),
                MPI_BYTE, MPI_COMM_WORLD);
  std::vector<T> ref(all.begin(), all.begin() + n);
  for (int r = 1; r < g_size; ++r)
    for (int64_t i = 0; i < n; ++i) ref[i] = apply(ref[i], all[r * n + i], op);
  if (!shm.allreduce(mine.data(), n, type, op)) return 1;
  int bad = std::memcmp(mine.data(), ref.data(), n * sizeof(T)) != 0;
  if (bad) std::fprintf(stderr, "rank %d: MISMATCH n=%lld salt=%d\n", g_rank, static_cast<long long>(n), salt);
  return bad;
}

int run_checks(int64_t chunk) {
  auto shm = ShmAllreduce::create(MPI_COMM_WORLD, chunk);
  if (!shm) {
    if (g_rank == 0) std::printf("no shm path (1 rank or disabled)\n");
    return 0;
  }
  // Counts: tiny, around 16-element slice alignment, around chunk multiples and pipeline depths.
  std::vector<int64_t> counts = {1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 1000, 1001, 4099};
  for (int64_t esize : {4, 8}) {
    int64_t per = std::max<int64_t>(1, chunk / esize);
    for (int64_t k : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33})  // around 2 x 16 slots
      for (int64_t d : {-1, 0, 1}) counts.push_back(std::max<int64_t>(1, k * per + d));
  }
  if (chunk >= 4096) counts.push_back(3 * 1000 * 1000 + 7);  // many chunks (with 256 B: slow)
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  int bad = 0, n_checks = 0, salt = 0;
  for (MPI_Op op : {MPI_SUM, MPI_MAX, MPI_MIN})
    for (int64_t n : counts) {
      bad += check_one<float>(*shm, n, MPI_FLOAT, op, ++salt);
      bad += check_one<double>(*shm, n, MPI_DOUBLE, op, ++salt);
      bad += check_one<int32_t>(*shm, n, MPI_INT32_T, op, ++salt);
      bad += check_one<int64_t>(*shm, n, MPI_INT64_T, op, ++salt);
      n_checks += 4;
    }
  // Declined: another type or op returns false and touches nothing.
  std::vector<float> f(8, 2.f);
  if (shm->allreduce(f.data(), 8, MPI_FLOAT, MPI_PROD) || f != std::vector<float>(8, 2.f)) ++bad;
  std::vector<uint8_t> b(8, 1);
  if (shm->allreduce(b.data(), 8, MPI_UINT8_T, MPI_SUM)) ++bad;
  if (!shm->allreduce(nullptr, 0, MPI_FLOAT, MPI_SUM)) ++bad;
  bad += check_one<float>(*shm, 33, MPI_FLOAT, MPI_SUM, 99);  // still in step
  int all_bad = 0;
  MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0)
    std::printf("check chunk=%lld ranks=%d: %d cases x %d ranks, %d mismatches -> %s\n", static_cast<long long>(chunk),
                g_size, n_checks + 4, g_size, all_bad, all_bad ? "FAIL" : "OK");
  return all_bad;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void run_timing(const std::vector<int64_t>& sizes_kib, double iters_scale, int64_t chunk) {
  auto shm = chunk > 0 ? ShmAllreduce::create(MPI_COMM_WORLD, chunk) : ShmAllreduce::create(MPI_COMM_WORLD);
  if (!shm) throw std::runtime_error("no shm path");
  if (g_rank == 0)
    std::printf("%10s %8s %12s %12s %10s %10s %7s %8s %12s %7s\n", "bytes", "iters", "shm_us", "mpi_us", "shm_GB/s",
                "mpi_GB/s", "ratio", "sleeps", "shm2_us", "ratio2");
  for (int64_t kib : sizes_kib) {
    const int64_t bytes = kib * 1024, n = bytes / 4;
    std::vector<float> buf(n, 0.f);  // zeros: sums stay zero (no overflow, no denormals)
    int iters = static_cast<int>(std::clamp<double>(iters_scale * (512.0 * 1024 * 1024) / bytes, 12, 600));
    std::vector<double> ta, tb, ta2;
    uint64_t s0 = shm->sleeps();
    for (int it = -3; it < iters; ++it) {
      // shm (after the last MPI call), shm again (after a shm call: shm2), MPI.
      for (int which : {0, 2, 1}) {
        // Each call starts from a buffer this rank has just written, as a DDP bucket after
        // backward: otherwise the previous call's cache state (lines the peer read) is charged
        // to the next call (an A/A run of one ShmAllreduce showed a 25% position bias).
        std::fill(buf.begin(), buf.end(), 0.f);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (which != 1)
          shm->allreduce(buf.data(), n, MPI_FLOAT, MPI_SUM);
        else
          MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t = MPI_Wtime() - t0;
        if (it >= 0) (which == 0 ? ta : which == 1 ? tb : ta2).push_back(t);
      }
    }
    MPI_Allreduce(MPI_IN_PLACE, ta.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, tb.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, ta2.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double a = median(ta), b = median(tb), a2 = median(ta2), f = 2.0 * (g_size - 1) / g_size * bytes / 1e9;
    if (g_rank == 0)
      std::printf("%10lld %8d %12.1f %12.1f %10.2f %10.2f %7.3f %8llu %12.1f %7.3f\n", static_cast<long long>(bytes),
                  iters, a * 1e6, b * 1e6, f / a, f / b, b / a, static_cast<unsigned long long>(shm->sleeps() - s0),
                  a2 * 1e6, b / a2);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  bool check = false;
  double iters_scale = 1.0;
  int64_t chunk = 0;
  std::vector<int64_t> sizes;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--check")
      check = true;
    else if (a == "--iters-scale" && i + 1 < argc)
      iters_scale = std::atof(argv[++i]);
    else if (a == "--chunk" && i + 1 < argc)
      chunk = std::atoll(argv[++i]);
    else if (a == "--sizes-kib" && i + 1 < argc) {
      std::string s = argv[++i];
      for (size_t p = 0; p < s.size();) {
        size_t q = s.find(',', p);
        sizes.push_back(std::atoll(s.substr(p, q - p).c_str()));
        p = q == std::string::npos ? s.size() : q + 1;
      }
    }
  }
  if (sizes.empty())
    for (int64_t k = 64; k <= 64 * 1024; k *= 2) sizes.push_back(k);
  int rc = 0;
  try {
    if (check) {
      for (int64_t c : {int64_t{256}, int64_t{4096}, chunk > 0 ? chunk : ShmAllreduce::kDefaultChunkBytes})
        rc |= run_checks(c);
    } else {
      run_timing(sizes, iters_scale, chunk);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", g_rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
