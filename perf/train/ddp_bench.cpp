// ddp_bench: step time of one model with and without DDP, on in-memory random data, so only
// compute and communication are measured (the data path has its own benchmark). With
// `--data FILE.h5` the batches come from the real Loader (sampler + prefetch thread) instead,
// and data_wait_s is the median time a step spent blocked waiting for its batch.
//
//   mpirun -np N build/perf/ddp_bench --model cnn --batch 64 --mode ddp --bucket-mb 25
//
// Prints one JSON line (rank 0): median step time, backward time, time blocked in finalize,
// the serial allreduce time of all buckets (measured separately, same buffers), and the
// fraction of communication hidden behind backward = 1 - finalize_wait / serial_comm.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/sgd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "comm/router.h"
#include "dataset/loader.h"
#include "ddp/ddp.h"
#include "ddp/sync_batchnorm.h"
#include "model/models.h"
#include "runtime/device.h"
#include "runtime/guard.h"
#include "runtime/world.h"

using namespace hpctrain;

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  return run_guarded(argc, argv, [&](World& w) {
    std::string model_name = "cnn", mode = "ddp";
    int64_t batch = 64;
    int steps = 30, warmup = 5;
    double bucket_mb = 25;
    bool sync_bn = false;
    std::string device = "cpu", data;
    int prefetch = 2;
    CLI::App app{"ddp_bench"};
    app.add_option("--model", model_name);
    app.add_option("--mode", mode, "plain|ddp");
    app.add_option("--batch", batch);
    app.add_option("--steps", steps);
    app.add_option("--warmup", warmup);
    app.add_option("--bucket-mb", bucket_mb);
    app.add_flag("--sync-bn", sync_bn);
    app.add_option("--device", device, "cpu|cuda (local rank's GPU)");
    app.add_option("--data", data, "HDF5 file read through the Loader (default: in-memory random batch)");
    app.add_option("--prefetch", prefetch, "Loader prefetch depth with --data");
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      return app.exit(e);
    }
    at::set_num_threads(1);
    DeviceChoice dc = choose_device(device, w.local_rank(), w.local_size(), visible_cuda_devices());
    activate_device(dc);
    c10::Device dev =
        dc.cuda ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(dc.index)) : c10::Device(c10::kCPU);
    DeviceRouter comm(w.mpi_comm(), dc.cuda ? dc.index : -1);
    torch::manual_seed(0);
    NormFactory norm = batchnorm2d_factory();
    if (sync_bn) {
      Communicator* c = &comm;
      norm = [c](int64_t ch) { return make_batch_norm(2, torch::nn::BatchNormOptions(ch), c, "bn"); };
    }
    std::unique_ptr<Loader> loader;
    std::vector<int64_t> shape = {1, 28, 28};
    int64_t classes = 10;
    if (!data.empty()) {
      LoaderOptions lo;
      lo.batch_size = batch, lo.prefetch = prefetch, lo.device = dev;
      loader = std::make_unique<Loader>(data, w.size(), w.rank(), lo);
      shape = loader->info().sample_shape, classes = loader->info().num_classes;
    }
    auto model = make_model(model_name, shape, classes, norm);
    model->to(dev);
    std::unique_ptr<DistributedDataParallel> ddp;
    if (mode == "ddp") {
      DdpOptions o;
      o.bucket_cap_mb = bucket_mb;
      o.broadcast_buffers = !sync_bn;
      ddp = std::make_unique<DistributedDataParallel>(model.ptr(), comm, o);
    }
    torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    at::Tensor x = at::randn({batch, 1, 28, 28}, dev),
               y = at::randint(0, 10, {batch}, at::TensorOptions().dtype(at::kLong).device(dev));
    // The next batch from the loader (wrapping to a new epoch); returns the time blocked on it.
    int64_t epoch = 0;
    auto fetch = [&]() -> double {
      if (!loader) return 0;
      double before = loader->data_wait_seconds();
      std::optional<Batch> b = loader->next();
      if (!b) {
        loader->start_epoch(++epoch);
        b = loader->next();
      }
      x = b->images, y = b->labels;
      return loader->data_wait_seconds() - before;
    };
    // On a GPU, time only finished work: synchronize at the end of each step.
    auto sync = [&] {
      if (dc.cuda) (void)x.sum().item<float>();
    };
    std::vector<double> step_t, bwd_t, wait_t, data_t;
    for (int s = 0; s < warmup + steps; ++s) {
      double t0 = now();
      double data_wait = fetch();
      if (ddp) ddp->prepare_forward();
      at::Tensor loss = at::cross_entropy_loss(model->forward(x), y);
      double tb = now();
      if (ddp)
        ddp->backward(loss);
      else
        loss.backward();
      double te = now();
      opt.step();
      if (ddp)
        ddp->zero_grad();
      else
        opt.zero_grad(false);
      sync();
      double t1 = now();
      if (s >= warmup) {
        step_t.push_back(t1 - t0);
        bwd_t.push_back(te - tb);
        wait_t.push_back(ddp ? ddp->last_step().finalize_wait_s : 0);
        data_t.push_back(data_wait);
      }
    }
    // Serial communication time of the same buckets, no compute to hide behind.
    double comm_t = 0;
    int buckets = 0;
    if (ddp && w.size() > 1) {
      std::vector<double> ct;
      for (int r = 0; r < 10; ++r) {
        MPI_Barrier(w.mpi_comm());
        double t0 = now();
        for (size_t b = 0; b < ddp->plan().buckets.size(); ++b)
          comm.allreduce(ddp->reducer().bucket_buffer(b), ReduceOp::kSum, "bench")->wait();
        ct.push_back(now() - t0);
      }
      comm_t = median(ct);
    }
    std::vector<int64_t> bucket_bytes;  // launch order, for perf/scaling_model.py
    if (ddp) {
      buckets = static_cast<int>(ddp->plan().buckets.size());
      for (const auto& b : ddp->plan().buckets) bucket_bytes.push_back(b.bytes);
    }
    double step = median(step_t), wait = median(wait_t);
    // Slowest rank's median step: the world moves at its pace.
    double worst = step;
    MPI_Allreduce(&step, &worst, 1, MPI_DOUBLE, MPI_MAX, w.mpi_comm());
    if (w.rank() == 0) {
      nlohmann::json j = {{"model", model_name},
                          {"mode", mode},
                          {"world_size", w.size()},
                          {"batch_per_rank", batch},
                          {"bucket_mb", bucket_mb},
                          {"sync_bn", sync_bn},
                          {"buckets", buckets},
                          {"bucket_bytes", bucket_bytes},
                          {"step_s", worst},
                          {"backward_s", median(bwd_t)},
                          {"finalize_wait_s", wait},
                          {"serial_comm_s", comm_t},
                          {"data", data.empty() ? "memory" : data},
                          {"data_wait_s", median(data_t)},
                          {"hidden_fraction", comm_t > 0 ? std::max(0.0, 1.0 - wait / comm_t) : 0.0},
                          {"samples_per_s", batch * w.size() / worst}};
      std::printf("%s\n", j.dump().c_str());
    }
    return 0;
  });
}
