// CommSettings::from_env: HPCTRAIN_COLLECTIVE_TIMEOUT and HPCTRAIN_DEBUG_COLLECTIVES over the
// defaults; a malformed value is a CollectiveError naming the variable.
#include "comm/comm_settings.h"

#include <cstdlib>
#include <string>

#include "runtime/check.h"

namespace hpctrain {

const char* to_string(AllreduceAlgo a) {
  switch (a) {
    case AllreduceAlgo::kAuto: return "auto";
    case AllreduceAlgo::kFlat: return "flat";
    case AllreduceAlgo::kHierarchical: return "hierarchical";
  }
  return "auto";
}

AllreduceAlgo parse_allreduce_algo(const std::string& s) {
  if (s == "auto") return AllreduceAlgo::kAuto;
  if (s == "flat") return AllreduceAlgo::kFlat;
  if (s == "hierarchical") return AllreduceAlgo::kHierarchical;
  throw CollectiveError("allreduce algorithm '" + s + "' is not one of flat|hierarchical|auto");
}

CommSettings CommSettings::from_env() {
  CommSettings s;
  if (const char* v = std::getenv("HPCTRAIN_COLLECTIVE_TIMEOUT"); v && *v) {
    char* end = nullptr;
    double t = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(t >= 0))
      throw CollectiveError(std::string("HPCTRAIN_COLLECTIVE_TIMEOUT='") + v +
                            "' is not a number of seconds >= 0 (0 turns the watchdog off)");
    s.collective_timeout_s = t;
  }
  if (const char* v = std::getenv("HPCTRAIN_DEBUG_COLLECTIVES"); v && *v) {
    std::string b = v;
    if (b == "1" || b == "true" || b == "on" || b == "yes") {
      s.debug_collectives = true;
    } else if (b == "0" || b == "false" || b == "off" || b == "no") {
      s.debug_collectives = false;
    } else {
      throw CollectiveError("HPCTRAIN_DEBUG_COLLECTIVES='" + b + "' is not one of 1/0/true/false/on/off");
    }
  }
  return s;
}

}  // namespace hpctrain
