// Checkpoint file-system steps over POSIX open/write/fsync/rename, each error naming the path
// and errno's text; prune renames the doomed directories to *.tmp and fsyncs once before
// deleting them.
#include "ckpt/dir_ops.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>

#include "runtime/check.h"

namespace fs = std::filesystem;

namespace hpctrain::ckpt {

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error("cannot open " + path + " to fsync: " + std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) throw Error("fsync " + path + " failed: " + std::strerror(err));
}

static std::string parent_of(const std::string& path) {
  auto p = fs::path(path).parent_path();
  return p.empty() ? "." : p.string();
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw Error("rename " + from + " -> " + to + " failed: " + std::strerror(errno));
}

void rename_durable(const std::string& from, const std::string& to) {
  rename_or_throw(from, to);
  fsync_path(parent_of(to));
}

void pwrite_all(int fd, const void* data, size_t n, uint64_t off, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw Error("write " + path + " failed: " + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
    off += static_cast<uint64_t>(w);
  }
}

void write_file(const std::string& tmp, const std::string& content, bool sync) {
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error("cannot create " + tmp + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw Error("write " + tmp + " failed: " + std::strerror(err));
    }
    off += static_cast<size_t>(n);
  }
  int rc = sync ? ::fsync(fd) : 0;
  int err = errno;
  ::close(fd);
  if (rc != 0) throw Error("fsync " + tmp + " failed: " + std::strerror(err));
}

std::vector<std::pair<int64_t, std::string>> complete_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  static const std::regex re("step-([0-9]{8,})");
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    std::string name = e.path().filename().string();
    if (e.is_directory() && std::regex_match(name, m, re) && fs::exists(e.path() / "manifest.json"))
      out.emplace_back(std::stoll(m[1]), e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

int remove_stale(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  int n = 0;
  static const std::regex re("step-[0-9]{8,}(\\.old)?\\.tmp");
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (std::regex_match(name, re) || name == "latest.tmp") {
      fs::remove_all(e.path());
      ++n;
    }
  }
  return n;
}

void prune(const std::string& dir, int keep) {
  if (keep <= 0) return;
  auto all = complete_checkpoints(dir);
  std::vector<std::string> doomed;
  for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i) {
    doomed.push_back(all[i].second + ".tmp");
    rename_or_throw(all[i].second, doomed.back());
  }
  if (doomed.empty()) return;
  fsync_path(dir);
  for (const auto& d : doomed) fs::remove_all(d);
}

namespace {
FaultHook& fault_hook() {
  static FaultHook hook;
  return hook;
}
}  // namespace

void set_fault_hook(FaultHook hook) { fault_hook() = std::move(hook); }

void fault_point(const std::string& point) {
  if (const FaultHook& hook = fault_hook()) hook(point);
}

}  // namespace hpctrain::ckpt
