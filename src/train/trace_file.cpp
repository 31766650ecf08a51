#include "train/trace_file.h"

#include <ATen/ATen.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "runtime/check.h"
#include "runtime/trace.h"

namespace hpctrain {

void write_trace(const std::string& path, Communicator& comm, int rank) {
  std::string mine = Tracer::get().events_json();
  at::Tensor bytes = at::empty({static_cast<int64_t>(mine.size())}, at::kByte);
  std::memcpy(bytes.data_ptr(), mine.data(), mine.size());
  std::vector<at::Tensor> parts;
  comm.allgather(bytes, &parts, "trace.gather")->wait();
  if (rank != 0) return;
  nlohmann::json events = nlohmann::json::array();
  for (auto& p : parts)
    for (auto& e : nlohmann::json::parse(std::string(static_cast<const char*>(p.data_ptr()),
                                                     static_cast<size_t>(p.numel()))))
      events.push_back(std::move(e));
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
    if (!out) throw Error("cannot write the trace file " + path);
  }
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace hpctrain
