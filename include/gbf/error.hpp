// Typed errors. Every failure gbf reports is one of these; each message names
// the problem (the argument, the layouts, the CUDA call) in plain words.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace gbf {

/// Base of every gbf error.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An argument is out of range or inconsistent (capacity 0, fpp outside (0,1), bad layout, ...).
class invalid_argument : public error {
 public:
  using error::error;
};

/// Two filters whose layouts differ were combined (merge, intersect, copy).
class layout_mismatch : public error {
 public:
  using error::error;
};

/// A filter or staging buffer could not be allocated; `bytes` is the request.
class allocation_error : public error {
 public:
  allocation_error(const std::string& what, std::uint64_t bytes) : error(what), bytes_(bytes) {}
  /// Size of the failed request in bytes.
  std::uint64_t bytes() const noexcept { return bytes_; }

 private:
  std::uint64_t bytes_;
};

/// The GPU backend was requested but no usable GPU or driver exists.
class no_gpu : public error {
 public:
  using error::error;
};

/// The operation needs a backend this filter does not use (e.g. an async call on a CPU filter).
class wrong_backend : public error {
 public:
  using error::error;
};

/// A CUDA runtime call failed; the message holds the call, file:line and CUDA's text.
class cuda_error : public error {
 public:
  cuda_error(const std::string& what, int code) : error(what), code_(code) {}
  /// The cudaError_t value.
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/// A file or buffer is not a valid gbf or Parquet filter: wrong magic, unsupported
/// version, truncated, checksum mismatch, impossible layout, malformed header, ...
class format_error : public error {
 public:
  using error::error;
};

/// The operating system refused a file operation; the message names the path and
/// strerror's text, `os_error()` is the errno value.
class io_error : public error {
 public:
  io_error(const std::string& what, int os_error) : error(what), os_error_(os_error) {}
  /// The errno value of the failed call.
  int os_error() const noexcept { return os_error_; }

 private:
  int os_error_;
};

/// A filter has no room for keys. A cuckoo filter whose inserts found no free
/// slot within max_kicks moves: the batch's other keys were inserted. A
/// non-scaling chain that is full: nothing of the batch was inserted. A chain
/// that cannot open another level: the batch's keys before that point were
/// inserted, not_inserted() counts the rest. A merge that would overfill a
/// level of a chain. In every case each key inserted before is still present.
class filter_full : public error {
 public:
  filter_full(const std::string& what, std::uint64_t not_inserted, std::uint64_t fits)
      : error(what), not_inserted_(not_inserted), fits_(fits) {}
  /// Keys of the batch that were not inserted (0 where no batch was involved, as in a merge).
  std::uint64_t not_inserted() const noexcept { return not_inserted_; }
  /// New keys the filter still takes (scaling chains; 0 for a cuckoo filter,
  /// whose room depends on which keys come).
  std::uint64_t fits() const noexcept { return fits_; }

 private:
  std::uint64_t not_inserted_;
  std::uint64_t fits_;
};

}  // namespace gbf
