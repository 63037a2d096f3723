// A temporary directory for a test, removed with it; names differ per process and object.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace onceflow::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& purpose = "test") {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("onceflow-" + purpose + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace onceflow::testing
