// Byte sinks for everything gbf writes: a growing vector, or a file written
// under a temporary name and atomically renamed over its target (the native
// filter format, Parquet export, the cost model cache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gbf::detail {

class byte_sink {
 public:
  virtual ~byte_sink() = default;
  virtual void write(const std::uint8_t* data, std::size_t n) = 0;
};

class vector_sink final : public byte_sink {
 public:
  explicit vector_sink(std::size_t expected_size) { bytes_.reserve(expected_size); }
  void write(const std::uint8_t* data, std::size_t n) override {
    bytes_.insert(bytes_.end(), data, data + n);
  }
  std::vector<std::uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<std::uint8_t> bytes_;
};

// A file written under a temporary name beside `path` and renamed over it by
// commit() once complete and fsync'ed; until then `path` is untouched, and a
// sink destroyed without commit() removes its temporary file. The temporary
// name is path + ".tmp.<pid>.<n>", created with O_EXCL so that concurrent
// saves (other processes, other threads) never share one. Failures throw
// io_error("save '<path>': <what>: <strerror>").
class atomic_file_sink final : public byte_sink {
 public:
  explicit atomic_file_sink(const std::string& path);
  atomic_file_sink(const atomic_file_sink&) = delete;
  atomic_file_sink& operator=(const atomic_file_sink&) = delete;
  ~atomic_file_sink() override;

  void write(const std::uint8_t* data, std::size_t n) override;
  /// Makes the data durable, then atomically replaces `path` with it.
  void commit();

 private:
  [[noreturn]] void fail(const std::string& what) const;
  void sync_directory() const;

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace gbf::detail
