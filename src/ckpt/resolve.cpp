// Checkpoint path resolution: step directory, checkpoint root with `latest`, the `latest` file.
#include "ckpt/resolve.h"

#include <filesystem>
#include <fstream>

#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace fs = std::filesystem;

namespace hpctrain::ckpt {
namespace {

// The step directory ROOT/latest names; throws if it names nothing that exists.
std::string follow_latest(const fs::path& latest) {
  std::ifstream in(latest);
  std::string name;
  in >> name;
  if (name.empty()) throw Error(latest.string() + " is empty");
  fs::path target = latest.parent_path() / name;
  if (name.find('/') != std::string::npos || !fs::is_directory(target))
    throw Error(latest.string() + " names " + printable(name) + ", which is not a checkpoint directory there");
  return target.string();
}

}  // namespace

std::string resolve_checkpoint_path(const std::string& in) {
  fs::path path(in);
  if (path.has_relative_path() && !path.has_filename()) path = path.parent_path();  // "DIR/"
  if (path.filename() == "latest" && fs::is_regular_file(path)) return follow_latest(path);
  if (fs::exists(path / "manifest.json")) return path.string();
  if (fs::is_regular_file(path / "latest")) return follow_latest(path / "latest");
  if (!fs::exists(path)) throw Error("checkpoint " + in + " does not exist");
  if (fs::is_directory(path) && path.filename().string().rfind("step-", 0) == 0)
    return path.string();  // a step dir without manifest: verify reports the missing manifest
  throw Error(in + " is neither a checkpoint step directory nor a checkpoint root with `latest`");
}

}  // namespace hpctrain::ckpt
