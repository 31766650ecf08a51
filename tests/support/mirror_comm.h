// A fake Communicator for single-process tests: it acts as `k` ranks that all hold this rank's
// data (allreduce-sum multiplies by k, allgather returns k copies) and records every tag, so the collective path of
// SyncBatchNorm can be checked against BatchNorm on k copies of the batch.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "comm/communicator.h"

namespace hpctrain::testing {

class MirrorComm final : public Communicator {
 public:
  explicit MirrorComm(int k) : k_(k) {}
  int rank() const override { return 0; }
  int size() const override { return k_; }
  c10::DeviceType device_type() const override { return c10::DeviceType::CPU; }
  std::string name() const override { return "mirror"; }

  WorkHandle allreduce(at::Tensor t, ReduceOp op, std::string tag) override {
    tags.push_back(tag);
    if (op == ReduceOp::kSum) t.mul_(k_);
    return std::make_shared<Done>();
  }
  WorkHandle allreduce(std::vector<at::Tensor> ts, ReduceOp op, std::string tag) override {
    for (auto& t : ts) allreduce(t, op, tag);
    return std::make_shared<Done>();
  }
  WorkHandle broadcast(at::Tensor, int, std::string) override { return std::make_shared<Done>(); }
  WorkHandle allgather(at::Tensor t, std::vector<at::Tensor>* out, std::string tag) override {
    tags.push_back(tag);
    out->assign(k_, t.clone());
    return std::make_shared<Done>();
  }
  WorkHandle barrier(std::string) override { return std::make_shared<Done>(); }

  std::vector<std::string> tags;

 private:
  struct Done : Work {
    void wait() override {}
    bool done() const override { return true; }
  };
  int k_;
};

}  // namespace hpctrain::testing
