// Key plumbing shared by every filter kind (host/keys.hpp).
#include "host/keys.hpp"

#include "gbf/error.hpp"

namespace gbf::detail {
namespace {

const char* space_name(memory_space space) {
  return space == memory_space::device ? "device" : "host";
}

}  // namespace

namespace {

/// check_host_offsets for offsets of type Offset: a loop the compiler sees whole
/// (an out-of-line offset_at per key was 5-6% of a text query).
template <class Offset>
void check_offsets(const char* what, const Offset* offsets, std::size_t count, std::size_t data_bytes) {
  std::int64_t previous = 0;
  for (std::size_t i = 0; i <= count; ++i) {
    const std::int64_t value = offsets[i];
    if (offset_is_bad(i, value, previous, data_bytes))
      throw invalid_argument(std::string(what) + ": " + bad_offset_message(i, value, previous, data_bytes));
    previous = value;
  }
}

}  // namespace

void check_host_offsets(const char* what, const key_batch& keys) {
  if (keys.kind == key_kind::str32)
    check_offsets(what, static_cast<const std::int32_t*>(keys.offsets), keys.count, keys.data_bytes);
  else
    check_offsets(what, static_cast<const std::int64_t*>(keys.offsets), keys.count, keys.data_bytes);
}

key_batch check_batch(const char* what, key_batch batch) {
  batch.space = memory_space::host;
  if (batch.count == 0) return batch;
  const bool strings = batch.is_string();
  const std::string prefix = std::string(what) + (strings ? ": string keys: " : ": ");
  if (strings && batch.offsets == nullptr)
    throw invalid_argument(prefix + "offsets is null but count = " + std::to_string(batch.count));
  if (strings && batch.data == nullptr && batch.data_bytes > 0)
    throw invalid_argument(prefix + "data is null but data_bytes = " +
                           std::to_string(batch.data_bytes));
  if (!strings && batch.data == nullptr)
    throw invalid_argument(prefix + "keys is null but n = " + std::to_string(batch.count));
  const char* anchor = strings ? "offsets" : "keys";
  batch.space = locate(strings ? batch.offsets : batch.data);
  const auto same_space = [&](const void* p, const char* name) {
    if (p == nullptr) return;
    const memory_space space = locate(p);
    if (space != batch.space)
      throw invalid_argument(prefix + anchor + " are in " + space_name(batch.space) +
                             " memory but " + name + " is in " + space_name(space) +
                             " memory; all must be in the same memory space");
  };
  if (strings) same_space(batch.data, "data");
  same_space(batch.validity, "validity");
  if (strings && batch.space == memory_space::host) check_host_offsets(what, batch);
  // The kernels load whole keys and offsets: a misaligned device address faults,
  // and the fault is sticky (it ends the context for every CUDA user of the process).
  if (batch.space == memory_space::device) {
    const std::size_t width = strings ? offset_bytes(batch.kind) : key_bytes(batch.kind);
    const auto address = reinterpret_cast<std::uintptr_t>(strings ? batch.offsets : batch.data);
    if (address % width != 0)
      throw invalid_argument(prefix + anchor + " at device address " + std::to_string(address) +
                             " are not aligned to their " + std::to_string(width) +
                             " bytes; copy them to aligned memory (e.g. cudaMalloc's)");
  }
  return batch;
}

void check_results(const char* what, const key_batch& keys, const void* results) {
  if (keys.count == 0) return;
  if (results == nullptr) throw invalid_argument(std::string(what) + ": result array is null");
  const memory_space results_space = locate(results);
  if (results_space != keys.space)
    throw invalid_argument(std::string(what) + ": keys are in " + space_name(keys.space) +
                           " memory but results are in " + space_name(results_space) +
                           " memory; both must be in the same memory space");
}

std::int64_t offset_at(const key_batch& keys, std::size_t i) {
  return keys.kind == key_kind::str32 ? static_cast<const std::int32_t*>(keys.offsets)[i]
                                      : static_cast<const std::int64_t*>(keys.offsets)[i];
}

std::string bad_offset_message(std::size_t index, std::int64_t value, std::int64_t previous,
                               std::size_t data_bytes) {
  const std::string at = "offsets[" + std::to_string(index) + "] = " + std::to_string(value);
  if (index == 0 && value < 0) return "string keys: " + at + " is negative";
  if (index > 0 && value < previous)
    return "string keys: " + at + " < offsets[" + std::to_string(index - 1) +
           "] = " + std::to_string(previous) + " (offsets must not decrease)";
  return "string keys: " + at + " is past the end of the data (data_bytes = " +
         std::to_string(data_bytes) + ")";
}

std::uint64_t count_valid(const key_batch& host_keys) {
  if (host_keys.validity == nullptr) return host_keys.count;
  std::uint64_t valid = 0;
  for (std::size_t i = 0; i < host_keys.count; ++i)
    valid += key_valid(host_keys.validity, host_keys.validity_bit, i) ? 1 : 0;
  return valid;
}

std::uint64_t keys_to_count(const key_batch& keys) {
  if (keys.validity == nullptr || keys.count == 0) return keys.count;
  if (keys.space == memory_space::host) return count_valid(keys);
  std::vector<std::uint8_t> bits((keys.validity_bit + keys.count + 7) / 8);
  copy_device_to_host(bits.data(), keys.validity, bits.size());
  key_batch host = keys;
  host.validity = bits.data();
  return count_valid(host);
}

host_copy::host_copy(const key_batch& keys) : batch(keys) {
  if (keys.space == memory_space::host || keys.count == 0) return;
  const std::size_t n = keys.count;
  if (keys.is_string()) {
    keys_.resize((n + 1) * offset_bytes(keys.kind));  // the offsets
    copy_device_to_host(keys_.data(), keys.offsets, keys_.size());
    data_.resize(keys.data_bytes);
    if (!data_.empty()) copy_device_to_host(data_.data(), keys.data, data_.size());
    batch.offsets = keys_.data();
    batch.data = data_.data();
  } else {
    keys_.resize(n * key_bytes(keys.kind));
    copy_device_to_host(keys_.data(), keys.data, keys_.size());
    batch.data = keys_.data();
  }
  if (keys.validity != nullptr) {
    validity_.resize((keys.validity_bit + n + 7) / 8);
    copy_device_to_host(validity_.data(), keys.validity, validity_.size());
    batch.validity = validity_.data();
  }
  batch.space = memory_space::host;
  // A device batch's offsets were only ever checked on the device.
  if (keys.is_string()) check_host_offsets("verify_contains", batch);
}

std::vector<unsigned char> answers_on_host(const bool* answers, std::size_t n,
                                           memory_space space) {
  std::vector<unsigned char> out(n);
  if (n == 0) return out;
  if (space == memory_space::device) {
    copy_device_to_host(out.data(), answers, n);
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = answers[i] ? 1 : 0;
  }
  return out;
}

}  // namespace gbf::detail
