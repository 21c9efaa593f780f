// Helpers of the file-format tests, shared with the GPU round trips
// (tests/gpu/test_gpu_io.cpp): scratch directories, whole-file reads and
// writes, and a small filled filter.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "tests/support.hpp"
#include "gbf/filter.hpp"

namespace gbf::test {

using bytes = std::vector<std::uint8_t>;

/// A fresh directory under the system temp dir, removed with everything in it.
class temp_dir {
 public:
  temp_dir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "gbf_io_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  /// Names in the directory, to check that no temporary file was left behind.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

inline bytes read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_all(const std::string& path, const bytes& data) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

/// A filter of layout `l` (capacity 1000) holding 300 random keys that depend on the geometry.
inline filter filled_filter(const layout& l, const options& opts = on_cpu(2)) {
  filter f(l, opts, 1000);
  const auto keys = random_keys(300, l.words_per_block * 131 + l.bits_per_key);
  f.add(keys.data(), keys.size());
  return f;
}

}  // namespace gbf::test
