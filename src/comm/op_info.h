// OpInfo: what one collective is, for watchdog and desync reports. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>

namespace hpctrain {

struct OpInfo {
  std::string op;       // "allreduce", "broadcast", "allgather", "barrier"
  std::string dtype;    // "float32", ...
  int64_t numel = 0;    // elements in this rank's contribution
  uint64_t seq = 0;     // per-communicator sequence number, from 1
  std::string tag;      // the caller ("ddp.bucket[3]")
  bool metered = true;  // counted by CollectiveWaitMeter (a link probe is not)

  // "allreduce(float32, 1024) #57 from ddp.bucket[3]"
  std::string describe() const {
    return op + "(" + dtype + ", " + std::to_string(numel) + ") #" + std::to_string(seq) +
           (tag.empty() ? "" : " from " + tag);
  }
};

}  // namespace hpctrain
