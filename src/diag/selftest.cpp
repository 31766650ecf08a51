// Collective self-test: each op and dtype against closed-form expected values; a mismatch
// names the op, dtype and rank.
#include "diag/selftest.h"

#include <ATen/ATen.h>

#include "comm/communicator.h"

namespace hpctrain {
namespace {

// Rank r contributes (r + 1) everywhere; results are closed forms in the world size n.
double expected(ReduceOp op, int n) {
  switch (op) {
    case ReduceOp::kSum: return n * (n + 1) / 2.0;
    case ReduceOp::kAvg: return (n + 1) / 2.0;
    case ReduceOp::kMax: return n;
    case ReduceOp::kMin: return 1;
  }
  return 0;
}

SelfTestResult compare(std::string name, const at::Tensor& got, const at::Tensor& want) {
  SelfTestResult r{std::move(name), true, ""};
  at::Tensor g = got.to(at::kCPU).to(at::kDouble), w = want.to(at::kCPU).to(at::kDouble);
  if (g.sizes() != w.sizes()) {
    r.ok = false;
    r.detail = "shape differs";
  } else if (g.numel() > 0 && !at::allclose(g, w, 1e-6, 1e-6)) {
    r.ok = false;
    auto idx = (g - w).abs().argmax().item<int64_t>();
    r.detail = "element " + std::to_string(idx) + " is " + std::to_string(g.view(-1)[idx].item<double>()) +
               ", expected " + std::to_string(w.view(-1)[idx].item<double>());
  }
  return r;
}

}  // namespace

std::vector<SelfTestResult> run_collective_selftest(Communicator& comm, c10::Device device) {
  std::vector<SelfTestResult> out;
  const int n = comm.size(), me = comm.rank();
  const at::ScalarType dtypes[] = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kInt, at::kLong};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};
  for (auto dt : dtypes) {
    for (auto op : ops) {
      if (op == ReduceOp::kAvg && !at::isFloatingType(dt)) continue;
      for (int64_t len : {1, 1000}) {
        auto opts = at::TensorOptions().dtype(dt).device(device);
        at::Tensor t = at::full({len}, me + 1, opts);
        std::string name =
            std::string("allreduce ") + to_string(op) + " " + c10::toString(dt) + " n=" + std::to_string(len);
        try {
          comm.allreduce(t, op, "doctor")->wait();
          out.push_back(compare(name, t, at::full({len}, expected(op, n), opts.dtype(at::kDouble))));
        } catch (const std::exception& e) {
          out.push_back({name, false, e.what()});
        }
      }
    }
  }
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  // Broadcast from the last rank (a non-zero root whenever n > 1).
  {
    at::Tensor t = at::full({257}, me == n - 1 ? 42.0 : -1.0, opts);
    std::string name = "broadcast float32 root=" + std::to_string(n - 1);
    try {
      comm.broadcast(t, n - 1, "doctor")->wait();
      out.push_back(compare(name, t, at::full({257}, 42.0, opts)));
    } catch (const std::exception& e) {
      out.push_back({name, false, e.what()});
    }
  }
  // Allgather of uneven contributions: rank r sends r rows (rank 0 sends none) of value r.
  {
    at::Tensor t = at::full({me, 3}, me, opts);
    std::vector<at::Tensor> parts;
    std::string name = "allgather uneven float32";
    try {
      comm.allgather(t, &parts, "doctor")->wait();
      bool ok = static_cast<int>(parts.size()) == n;
      for (int r = 0; ok && r < n; ++r) {
        auto c = compare(name, parts[r], at::full({r, 3}, r, opts));
        if (!c.ok) out.push_back(c), ok = false;
      }
      if (ok)
        out.push_back({name, true, ""});
      else if (static_cast<int>(parts.size()) != n)
        out.push_back({name, false, "wrong part count"});
    } catch (const std::exception& e) {
      out.push_back({name, false, e.what()});
    }
  }
  // Flat collectives (ZeRO-1): rank r contributes (r + 1) everywhere, blocks of 1 and 1000.
  for (auto dt : dtypes) {
    for (int64_t len : {1, 1000}) {
      auto o = at::TensorOptions().dtype(dt).device(device);
      std::string name = std::string("reduce_scatter sum ") + c10::toString(dt) + " block=" + std::to_string(len);
      try {
        at::Tensor in = at::full({len * n}, me + 1, o), block = at::empty({len}, o);
        comm.reduce_scatter(in, block, ReduceOp::kSum, "doctor")->wait();
        out.push_back(compare(name, block, at::full({len}, expected(ReduceOp::kSum, n), o.dtype(at::kDouble))));
      } catch (const std::exception& e) {
        out.push_back({name, false, e.what()});
      }
      name = std::string("allgather_into ") + c10::toString(dt) + " block=" + std::to_string(len);
      try {
        at::Tensor flat = at::zeros({len * n}, o);
        at::Tensor mine = flat.narrow(0, me * len, len);
        mine.fill_(me + 1);
        comm.allgather_into(mine, flat, "doctor")->wait();
        at::Tensor want = at::arange(1, n + 1, o.dtype(at::kDouble)).repeat_interleave(len);
        out.push_back(compare(name, flat, want));
      } catch (const std::exception& e) {
        out.push_back({name, false, e.what()});
      }
    }
  }
  try {
    comm.barrier("doctor")->wait();
    out.push_back({"barrier", true, ""});
  } catch (const std::exception& e) {
    out.push_back({"barrier", false, e.what()});
  }
  return out;
}

}  // namespace hpctrain
