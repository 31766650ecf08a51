// A TOML file with `body` under /tmp, a new name per call (config tests).
#pragma once

#include <unistd.h>

#include <fstream>
#include <string>

inline std::string write_toml(const std::string& body) {
  static int n = 0;
  std::string path = "/tmp/hpctrain_config_test_" + std::to_string(getpid()) + "_" + std::to_string(n++) + ".toml";
  std::ofstream(path) << body;
  return path;
}
