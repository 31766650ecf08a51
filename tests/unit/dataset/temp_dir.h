// A per-test temporary directory, removed at the end of the test.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace hpctrain::testing {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/hpctrain-dataset-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace hpctrain::testing
