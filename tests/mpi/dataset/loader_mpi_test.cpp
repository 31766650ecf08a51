// Loader across real ranks (1, 2, 4): equal batch counts, disjoint shares that cover the data set
// once (padding marked invalid), and agreement with a single-process sampler reference.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>

#include "dataset/loader.h"
#include "runtime/check.h"
#include "support/test_world.h"

using hpctrain::testing::world;

namespace {

// Rank 0 writes a float32 file whose sample i is filled with the value i, so a batch tells which
// samples it holds; every rank gets the path.
std::string make_indexed_file(int64_t n) {
  char buf[256] = {0};
  if (world().rank() == 0) {
    char tmpl[] = "/tmp/hpctrain-mpi-dataset-XXXXXX";
    std::snprintf(buf, sizeof buf, "%s/idx.h5", ::mkdtemp(tmpl));
    std::vector<float> img(n * 4);
    std::vector<int64_t> lab(n);
    for (int64_t i = 0; i < n; ++i) {
      std::fill_n(img.begin() + i * 4, 4, float(i));
      lab[i] = i % 3;
    }
    hid_t f = H5Fcreate(buf, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t idims[4] = {hsize_t(n), 1, 2, 2}, ldims[1] = {hsize_t(n)};
    hid_t s = H5Screate_simple(4, idims, nullptr);
    hid_t d = H5Dcreate2(f, "images", H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, img.data());
    H5Dclose(d), H5Sclose(s);
    s = H5Screate_simple(1, ldims, nullptr);
    d = H5Dcreate2(f, "targets", H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, lab.data());
    H5Dclose(d), H5Sclose(s), H5Fclose(f);
  }
  HPC_MPI_CHECK(MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, world().mpi_comm()));
  return buf;
}

std::vector<int64_t> allgather(const std::vector<int64_t>& mine) {
  int n = int(mine.size()), w = world().size();
  std::vector<int> counts(w), displs(w);
  HPC_MPI_CHECK(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, world().mpi_comm()));
  int total = 0;
  for (int r = 0; r < w; ++r) displs[r] = total, total += counts[r];
  std::vector<int64_t> all(total);
  HPC_MPI_CHECK(MPI_Allgatherv(mine.data(), n, MPI_INT64_T, all.data(), counts.data(), displs.data(), MPI_INT64_T,
                               world().mpi_comm()));
  return all;
}

}  // namespace

TEST(LoaderMpi, RanksGetDisjointEqualSharesCoveringTheDataSet) {
  const int64_t n = 103;  // not a multiple of 2 or 4: padding happens
  const std::string path = make_indexed_file(n);
  hpctrain::LoaderOptions o;
  o.batch_size = 6, o.prefetch = 2, o.seed = 17, o.labels = "targets";
  hpctrain::Loader l(path, world().size(), world().rank(), o);
  l.start_epoch(3);
  hpctrain::DistributedSampler ref(n, world().size(), world().rank(), true, 17, false);
  ref.set_epoch(3);
  std::vector<int64_t> valid_ids, counts;
  int64_t batches = 0;
  while (auto b = l.next()) {
    auto ids = b->images.flatten(1).select(1, 0).to(at::kLong);
    std::vector<bool> v;
    auto want = ref.batch(batches, 6, &v);
    for (int64_t i = 0; i < ids.size(0); ++i) {
      ASSERT_EQ(ids[i].item<int64_t>(), want[i]) << "rank " << world().rank() << " batch " << batches;
      ASSERT_EQ(b->labels[i].item<int64_t>(), want[i] % 3);
      if (b->valid[i].item<bool>()) valid_ids.push_back(want[i]);
    }
    counts.push_back(ids.size(0));
    ++batches;
  }
  // Every rank has the same batch count and the same batch sizes.
  auto all_counts = allgather(counts);
  ASSERT_EQ(int64_t(all_counts.size()), batches * world().size()) << "ranks disagree on batch count";
  for (int r = 1; r < world().size(); ++r)
    for (int64_t b = 0; b < batches; ++b) EXPECT_EQ(all_counts[r * batches + b], all_counts[b]);
  // Valid samples over all ranks: each of 0..n-1 exactly once.
  auto all = allgather(valid_ids);
  std::sort(all.begin(), all.end());
  ASSERT_EQ(int64_t(all.size()), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(all[i], i);
  HPC_MPI_CHECK(MPI_Barrier(world().mpi_comm()));
  if (world().rank() == 0) std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}
