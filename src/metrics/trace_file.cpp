#include "metrics/trace_file.h"

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "comm/small_collectives.h"
#include "runtime/check.h"
#include "runtime/trace.h"

namespace hpctrain {

void write_trace(const std::string& path, Communicator& comm, int rank) {
  std::vector<std::string> parts = allgather_strings(comm, Tracer::get().events_json(), "trace.gather");
  if (rank != 0) return;
  nlohmann::json events = nlohmann::json::array();
  for (auto& p : parts)
    for (auto& e : nlohmann::json::parse(p)) events.push_back(std::move(e));
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
    if (!out) throw Error("cannot write the trace file " + path);
  }
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace hpctrain
