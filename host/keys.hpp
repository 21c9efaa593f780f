// Key plumbing every filter kind shares: checking a caller's batch, reading
// it, copying a device batch to the host, and the checked queries. The
// backends receive batches only after check_batch has accepted them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gbf/backend.hpp"
#include "gbf/error.hpp"
#include "gbf/keys.hpp"

namespace gbf::detail {

/// Describes a caller's batch and checks what can be checked where it lives:
/// pointers and memory spaces always (`space` is filled in here), string
/// offsets when they are in host memory (device offsets are checked on the
/// device before any bit is written). Throws invalid_argument, its message
/// starting with `what` (the operation).
key_batch check_batch(const char* what, key_batch batch);

/// Throws invalid_argument for the first bad offset of a host string batch.
void check_host_offsets(const char* what, const key_batch& host_keys);

/// Throws invalid_argument unless `results` (room for keys.count answers) is
/// non-null and in the keys' memory space: backends write answers in place.
void check_results(const char* what, const key_batch& keys, const void* results);

/// The query every filter kind answers alike: checks the batch and the answer
/// array, skips an empty synchronous batch, and hands the rest to `backend`,
/// which has contains(batch, found, call) (a kind's backend).
template <class Backend>
void checked_contains(Backend& backend, const key_batch& keys, bool* found,
                      const call_options& call) {
  const key_batch batch = check_batch(call.what, keys);
  check_results(call.what, batch, found);
  if (batch.count == 0 && !call.async) return;
  backend.contains(batch, found, call);
}

/// count as every kind answers it (see checked_contains): an _async call
/// needs `device_count`, where the count lands.
template <class Backend>
std::uint64_t checked_count(Backend& backend, const key_batch& keys, std::uint64_t* device_count,
                            const call_options& call) {
  if (call.async && device_count == nullptr)
    throw invalid_argument(std::string(call.what) + ": count is null");
  const key_batch batch = check_batch(call.what, keys);
  if (batch.count == 0 && !call.async) return 0;
  return backend.count(batch, device_count, call);
}

/// select as every kind answers it (see checked_count); `rows` has room for every key.
template <class Backend>
std::uint64_t checked_select(Backend& backend, const key_batch& keys, std::uint64_t* rows,
                             std::uint64_t* device_count, const call_options& call) {
  if (call.async && device_count == nullptr)
    throw invalid_argument(std::string(call.what) + ": count is null");
  const key_batch batch = check_batch(call.what, keys);
  check_results(call.what, batch, rows);
  if (batch.count == 0 && !call.async) return 0;
  return backend.select(batch, rows, device_count, call);
}

/// Offset i of a string batch, read as int64 whatever its width.
std::int64_t offset_at(const key_batch& keys, std::size_t i);

/// The sentence check_batch throws for the first bad offset (offset_is_bad's
/// rule), e.g. "string keys: offsets[17] = 40 < offsets[16] = 52 (offsets must
/// not decrease)". `previous` is offsets[index - 1] (ignored for index 0).
std::string bad_offset_message(std::size_t index, std::int64_t value, std::int64_t previous,
                               std::size_t data_bytes);

/// Non-null keys among a host batch's keys (all when it has no bitmap).
std::uint64_t count_valid(const key_batch& host_keys);

/// Keys an add counts in keys_added: the non-null ones where the bitmap can be
/// read (host memory, or device memory read back synchronously).
std::uint64_t keys_to_count(const key_batch& keys);

/// A host copy of a device batch (its offsets, bytes and bitmap too); a host
/// batch is used in place. `batch` is what to read.
struct host_copy {
  explicit host_copy(const key_batch& keys);
  key_batch batch;

 private:
  std::vector<unsigned char> keys_, data_, validity_;
};

/// A host copy of `n` answers (bools) that live in `space`.
std::vector<unsigned char> answers_on_host(const bool* answers, std::size_t n,
                                           memory_space space);

/// Copies `bytes` from device memory `src` to host memory `dst` (synchronous);
/// throws no_gpu in a build without CUDA.
void copy_device_to_host(void* dst, const void* src, std::size_t bytes);

/// Whether `p` points to device memory (device or managed allocations). Host
/// memory, pinned host memory and any pointer when no GPU exists answer host.
memory_space locate(const void* p);

}  // namespace gbf::detail
