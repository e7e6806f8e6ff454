// TempDir: a fresh directory under the system temp dir for one test, removed
// with everything in it when the object goes away. Names are unique per
// process and object (mkdtemp), so tests never see each other's files, even
// when ctest runs them in parallel.
#pragma once

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace sluice::test {

class TempDir {
 public:
  explicit TempDir(std::string_view tag = "test") {
    std::string pattern =
        (std::filesystem::temp_directory_path() / ("sluice-" + std::string(tag) + "-XXXXXX"))
            .string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp '" + pattern + "' failed: " + std::strerror(errno));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  // The path of `name` inside the directory (nothing is created).
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string operator/(const std::string& name) const { return file(name); }
  // Writes `content` to `name` and returns its path.
  std::string write(const std::string& name, const std::string& content) const {
    const std::string p = file(name);
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace sluice::test
