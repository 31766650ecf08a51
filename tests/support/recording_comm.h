// A Communicator for tests that forwards every collective to `inner` and records it: `ops`
// counts them, `log` holds their tags in order ("ddp.bucket[0];ckpt.errors;...").
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"

namespace hpctrain::testing {

class RecordingComm final : public Communicator {
 public:
  explicit RecordingComm(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  c10::DeviceType device_type() const override { return inner_.device_type(); }
  std::string name() const override { return "recording"; }
  WorkHandle allreduce(at::Tensor t, ReduceOp op, std::string tag) override {
    record(tag);
    return inner_.allreduce(t, op, tag);
  }
  WorkHandle allreduce(std::vector<at::Tensor> ts, ReduceOp op, std::string tag) override {
    record(tag);
    return inner_.allreduce(std::move(ts), op, tag);
  }
  WorkHandle broadcast(at::Tensor t, int root, std::string tag) override {
    record(tag);
    return inner_.broadcast(t, root, tag);
  }
  WorkHandle allgather(at::Tensor t, std::vector<at::Tensor>* out, std::string tag) override {
    record(tag);
    return inner_.allgather(t, out, tag);
  }
  WorkHandle barrier(std::string tag) override {
    record(tag);
    return inner_.barrier(tag);
  }
  int ops = 0;
  std::string log;

 private:
  void record(const std::string& tag) {
    ++ops;
    log += tag + ";";
  }
  Communicator& inner_;
};

}  // namespace hpctrain::testing
