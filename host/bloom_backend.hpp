// The plain Bloom filter kind as its two backends implement it: the same
// operations on the same bits, the CPU's in host/cpu/bloom_backend.cpp and the
// GPU's in host/gpu/bloom_backend.cpp. gbf::filter owns one and forwards to it
// after checking the caller's arguments (host/keys.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gbf/backend.hpp"
#include "gbf/keys.hpp"
#include "gbf/layout.hpp"
#include "host/backend.hpp"

namespace gbf::detail {

class bloom_backend {
 public:
  virtual ~bloom_backend() = default;

  /// cpu or gpu.
  virtual backend kind() const noexcept = 0;

  /// Sets the bits of every non-null key. With `is_new` (in keys.space), also
  /// is_new[i] = key i was absent before it was added, in batch order: a key
  /// made present by an earlier key of the same batch, itself included, is not
  /// new; a null key is not new.
  virtual void add(const key_batch& keys, bool* is_new, const call_options& call) = 0;
  /// found[i] = key i is non-null and all its bits are set (found in keys.space).
  virtual void contains(const key_batch& keys, bool* found, const call_options& call) const = 0;
  /// Number of non-null keys whose bits are all set; an async call writes it to
  /// device memory `device_count` instead and returns 0.
  virtual std::uint64_t count(const key_batch& keys, std::uint64_t* device_count,
                              const call_options& call) const = 0;
  /// Writes the ascending indices of the non-null keys whose bits are all set to
  /// `rows` (room for keys.count, in keys.space); returns how many, or for an
  /// async call writes that to `device_count` and returns 0.
  virtual std::uint64_t select(const key_batch& keys, std::uint64_t* rows,
                               std::uint64_t* device_count, const call_options& call) const = 0;

  /// Zeroes the bit array.
  virtual void clear() = 0;
  /// this = this op other; `other` has the same kind and layout (checked by the caller).
  virtual void combine(const bloom_backend& other, set_op op) = 0;
  /// Words [first, first + count) = themselves op words[0 .. count), host words of the
  /// same layout: a slice at a time, so an operand on another backend is staged in
  /// steps, never whole. `first` is a multiple of 4 (the GPU combines 16-byte vectors).
  virtual void combine_host(std::uint64_t first, std::uint64_t count, const std::uint32_t* words,
                            set_op op) = 0;
  /// Words of block blocks[r] |= words[r * W .. (r + 1) * W) for r < count: host
  /// arrays, the blocks distinct and below num_blocks (checked by the caller).
  virtual void or_blocks(const std::uint32_t* blocks, const std::uint32_t* words, std::uint64_t count) = 0;
  /// Popcount of the bit array.
  virtual std::uint64_t popcount() const = 0;
  /// Copies the num_words words to host memory `out`.
  virtual void read_words(std::uint32_t* out) const = 0;
  /// Copies words [first, first + count) to host memory `out` (the caller checks the range).
  virtual void read_words(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const = 0;
  /// Replaces the bit array with num_words host words from `in`.
  virtual void write_words(const std::uint32_t* in) = 0;
  /// Replaces words [first, first + count) with host words from `in` (the caller checks the range).
  virtual void write_words(std::uint64_t first, std::uint64_t count, const std::uint32_t* in) = 0;
  /// Device address of the bit array; nullptr on the CPU.
  virtual std::uint32_t* device_words() = 0;
  /// Host address of the bit array; nullptr on the GPU.
  virtual std::uint32_t* host_words() { return nullptr; }
  /// Waits for every _async call's work; throws the deferred error of a bad
  /// _async string batch, its message starting with `what`. No-op on the CPU.
  virtual void synchronize(const char* what) const = 0;
};

/// CPU backend of layout `l`, zeroed. `threads` = 0 means all hardware threads;
/// simd = avx2 throws invalid_argument where the CPU lacks AVX2. `description`
/// (may be null) receives e.g. "cpu (avx2, 16 threads)".
std::unique_ptr<bloom_backend> make_cpu_bloom(const layout& l, const options& opts,
                                              std::string* description);

/// The kernels make_cpu_bloom(l, opts) runs: "scalar", "avx2" or "avx512".
/// Throws as make_cpu_bloom does for a bad words_per_block or simd choice.
const char* cpu_bloom_kernels(const layout& l, const options& opts);

/// GPU backend of layout `l` on the current device, zeroed. Throws no_gpu when
/// there is no usable GPU (or gbf was built without CUDA), allocation_error when
/// the bit array does not fit. `description` (may be null) receives e.g.
/// "gpu (NVIDIA H100 80GB HBM3, 79.1 GiB)".
std::unique_ptr<bloom_backend> make_gpu_bloom(const layout& l, const options& opts,
                                              std::string* description);

}  // namespace gbf::detail
