// Unique adds and deterministic placement for the cuckoo filter
// (kernels/cuckoo.cuh: add_sorted). The steps are those of
// cuckoo_placement::deterministic in gbf/cuckoo_filter.hpp, which
// host/cpu/cuckoo_backend.cpp runs on one thread; both sort by the same
// 64-bit keys with ties broken by batch position (CUB's radix sort is stable
// and the positions go in ascending), so both produce the same table.
//
// Sort keys pack (bucket, tag) as bucket << 32 | tag. Keys that take no part in
// a step get the sentinel ~0, which no real pair equals (buckets stop one
// short of 2^32), so they sort last and every kernel skips them.
//
// Scratch (each region 256-byte aligned): hashes[n] (8 B), sort keys [2][n]
// (8 B), positions [2][n] (4 B), first order [n] (4 B), representatives [n]
// (4 B), tail [n] (4 B), outcome [n] (1 B), flags [n] (1 B), the tail's
// length (8 B), then CUB's temporary storage (the larger of sort and select).
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
#include <string>

#include "kernels/cuckoo.cuh"
#include "kernels/cuckoo_device.cuh"
#include "kernels/keys.cuh"
#include "kernels/launch.cuh"

namespace gbf::detail::gpu::cuckoo {
namespace {

constexpr std::uint64_t sentinel = ~std::uint64_t{0};

// Outcomes while the steps run; the last step turns them into cuckoo_status.
constexpr std::uint8_t pending = 4;    // to be placed
constexpr std::uint8_t duplicate = 5;  // equal to an earlier key of the batch: its fate

__device__ __forceinline__ std::uint8_t as_byte(cuckoo_status s) {
  return static_cast<std::uint8_t>(s);
}

__device__ __forceinline__ std::uint64_t pack(std::uint64_t bucket, std::uint32_t tag) {
  return bucket << 32 | tag;
}

/// Which pair a step sorts by.
enum class sort_by { canonical, primary, alternate };

__global__ void __launch_bounds__(block_threads)
    start_kernel(std::size_t n, const std::uint8_t* __restrict__ validity, std::size_t validity_bit,
                 std::uint8_t* __restrict__ outcome) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    outcome[i] = key_valid(validity, validity_bit, i) ? pending : as_byte(cuckoo_status::skipped);
}

__global__ void __launch_bounds__(block_threads)
    sort_keys_kernel(std::size_t n, cuckoo_layout l, sort_by by,
                     const std::uint64_t* __restrict__ hashes,
                     const std::uint8_t* __restrict__ outcome, std::uint64_t* __restrict__ keys,
                     std::uint32_t* __restrict__ positions) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    positions[i] = static_cast<std::uint32_t>(i);
    if (outcome[i] != pending) {
      keys[i] = sentinel;
      continue;
    }
    const cuckoo_place p = cuckoo_place_of(hashes[i], l);
    const std::uint64_t bucket = by == sort_by::primary     ? p.bucket
                                 : by == sort_by::alternate ? p.alternate
                                                            : (p.bucket < p.alternate ? p.bucket : p.alternate);
    keys[i] = pack(bucket, p.tag);
  }
}

// Unique adds: the first entry of each run of equal (smaller bucket, tag) owns
// the run, walks it in batch order (a key repeated throughout a batch is thus
// one thread's serial walk: correct, slow), checks its key against the table
// as it was before the batch, and marks the others duplicates of it. The run's
// keys differ at most in which of the two buckets is their primary; the head
// is placed as any of them whose primary is the smaller bucket (it takes that
// key's hash), so the table does not depend on which key of the run comes first.
template <std::uint32_t F>
__global__ void __launch_bounds__(block_threads)
    dedupe_kernel(std::size_t n, cuckoo_layout l, const std::uint64_t* __restrict__ words,
                  std::uint64_t* __restrict__ hashes, const std::uint64_t* __restrict__ keys,
                  const std::uint32_t* __restrict__ positions, std::uint32_t* __restrict__ representative,
                  std::uint8_t* __restrict__ outcome) {
  for (std::size_t k = first_index(); k < n; k += grid_stride()) {
    const std::uint64_t key = keys[k];
    if (key == sentinel || (k != 0 && keys[k - 1] == key)) continue;
    const std::uint32_t head = positions[k];
    const cuckoo_place p = cuckoo_place_of(hashes[head], l);
    std::uint64_t a[cuckoo_bucket_words];
    std::uint64_t b[cuckoo_bucket_words];
    load_bucket_readonly(words, p.bucket, a);
    load_bucket_readonly(words, p.alternate, b);
    const bool present = cuckoo_bucket<F>::holds(a, p.tag) || cuckoo_bucket<F>::holds(b, p.tag);
    representative[head] = head;
    outcome[head] = present ? as_byte(cuckoo_status::present) : pending;
    bool oriented = p.bucket <= p.alternate;
    for (std::size_t j = k + 1; j < n && keys[j] == key; ++j) {
      representative[positions[j]] = head;
      outcome[positions[j]] = duplicate;
      if (!oriented) {
        const std::uint64_t h = hashes[positions[j]];
        const cuckoo_place q = cuckoo_place_of(h, l);
        if (q.bucket < q.alternate) {
          hashes[head] = h;
          oriented = true;
        }
      }
    }
  }
}

// A deterministic round: the first entry of each run of equal buckets owns the
// bucket for this kernel (no other thread touches it), and gives its free
// slots, lowest first, to the run's tags in sorted order.
template <std::uint32_t F>
__global__ void __launch_bounds__(block_threads)
    fill_runs_kernel(std::size_t n, std::uint64_t* __restrict__ words,
                     const std::uint64_t* __restrict__ keys,
                     const std::uint32_t* __restrict__ positions,
                     std::uint8_t* __restrict__ outcome) {
  using bucket_ops = cuckoo_bucket<F>;
  for (std::size_t k = first_index(); k < n; k += grid_stride()) {
    const std::uint64_t bucket = keys[k] >> 32;
    if (keys[k] == sentinel || (k != 0 && keys[k - 1] >> 32 == bucket)) continue;
    std::uint64_t* const w = words + bucket * cuckoo_bucket_words;
    std::uint64_t bucket_words[cuckoo_bucket_words];
    for (std::uint32_t i = 0; i < cuckoo_bucket_words; ++i) bucket_words[i] = w[i];
    for (std::size_t j = k; j < n && keys[j] >> 32 == bucket && keys[j] != sentinel; ++j) {
      const std::uint32_t s = bucket_ops::find(bucket_words, 0);
      if (s == bucket_ops::slots) break;  // full: the rest of the run stays pending
      const std::uint32_t wi = s / bucket_ops::slots_per_word;
      bucket_words[wi] = bucket_ops::with_tag(bucket_words[wi], s, static_cast<std::uint32_t>(keys[j]));
      outcome[positions[j]] = as_byte(cuckoo_status::inserted);
    }
    for (std::uint32_t i = 0; i < cuckoo_bucket_words; ++i) w[i] = bucket_words[i];
  }
}

__global__ void __launch_bounds__(block_threads)
    tail_flags_kernel(std::size_t n, const std::uint32_t* __restrict__ first_order,
                      const std::uint8_t* __restrict__ outcome, std::uint8_t* __restrict__ flags) {
  for (std::size_t k = first_index(); k < n; k += grid_stride())
    flags[k] = outcome[first_order[k]] == pending ? 1 : 0;
}

// The keys no round placed, one after another in round 1's order: the same
// eviction the CPU runs (cuckoo_insert_exclusive), on one thread.
template <std::uint32_t F>
__global__ void tail_kernel(cuckoo_layout l, std::uint32_t max_kicks, std::uint64_t* words,
                            const std::uint64_t* __restrict__ hashes,
                            const std::uint32_t* __restrict__ tail, const int* tail_length,
                            std::uint8_t* __restrict__ outcome, counter_t* counters) {
  cuckoo_move chain[cuckoo_max_kicks_limit];
  counter_t moves = 0;
  for (int j = 0; j < *tail_length; ++j) {
    const std::uint32_t position = tail[j];
    const cuckoo_place p = cuckoo_place_of(hashes[position], l);
    const std::uint32_t r = cuckoo_insert_exclusive<F>(words, l.num_buckets, p.bucket, p.alternate,
                                                       p.tag, max_kicks, chain);
    outcome[position] = as_byte(r == 0 ? cuckoo_status::failed : cuckoo_status::inserted);
    moves += r == 0 ? 0 : r - 1;
  }
  if (moves != 0) atomicAdd(counters + evictions, moves);
}

// Unique adds placed concurrently: the keys still pending, one thread each.
template <std::uint32_t F>
__global__ void __launch_bounds__(block_threads)
    insert_pending_kernel(std::size_t n, cuckoo_layout l, std::uint32_t max_kicks,
                          shared_table<F> table, const std::uint64_t* __restrict__ hashes,
                          std::uint8_t* __restrict__ outcome, counter_t* counters) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    if (outcome[i] != pending) continue;
    const cuckoo_place p = cuckoo_place_of(hashes[i], l);
    std::uint32_t moves = 0;
    const bool ok = table.insert(p.bucket, p.alternate, p.tag, max_kicks, moves);
    if (moves != 0) atomicAdd(counters + evictions, static_cast<counter_t>(moves));
    outcome[i] = as_byte(ok ? cuckoo_status::inserted : cuckoo_status::failed);
  }
}

// Duplicates take their representative's fate (present, or failed when it
// failed); statuses go out and the outcomes are counted, one atomic per warp.
__global__ void __launch_bounds__(block_threads)
    finish_kernel(std::size_t n, const std::uint32_t* __restrict__ representative,
                  const std::uint8_t* __restrict__ outcome, cuckoo_status* __restrict__ status,
                  counter_t* counters) {
  counter_t totals[3] = {0, 0, 0};  // inserted, present, failed
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    std::uint8_t o = outcome[i];
    if (o == duplicate)
      o = outcome[representative[i]] == as_byte(cuckoo_status::failed) ? as_byte(cuckoo_status::failed)
                                                                      : as_byte(cuckoo_status::present);
    if (status != nullptr) status[i] = static_cast<cuckoo_status>(o);
    totals[0] += o == as_byte(cuckoo_status::inserted);
    totals[1] += o == as_byte(cuckoo_status::present);
    totals[2] += o == as_byte(cuckoo_status::failed);
  }
  const int which[3] = {inserted, present, failed};
  for (int c = 0; c < 3; ++c) {
    counter_t v = totals[c];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if ((threadIdx.x & 31) == 0 && v != 0) atomicAdd(counters + which[c], v);
  }
}

constexpr std::size_t alignment = 256;
constexpr std::size_t aligned(std::size_t bytes) { return (bytes + alignment - 1) / alignment * alignment; }

std::size_t sort_temp_bytes(std::size_t n) {
  std::size_t bytes = 0;
  cub::DoubleBuffer<std::uint64_t> keys(nullptr, nullptr);
  cub::DoubleBuffer<std::uint32_t> values(nullptr, nullptr);
  GBF_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, values, static_cast<int>(n)));
  return bytes;
}

std::size_t select_temp_bytes(std::size_t n) {
  std::size_t bytes = 0;
  GBF_CUDA_TRY(cub::DeviceSelect::Flagged(nullptr, bytes, static_cast<const std::uint32_t*>(nullptr),
                                          static_cast<const std::uint8_t*>(nullptr),
                                          static_cast<std::uint32_t*>(nullptr),
                                          static_cast<int*>(nullptr), static_cast<int>(n)));
  return bytes;
}

/// The scratch regions of a batch of n keys.
struct regions {
  std::uint64_t* hashes;
  std::uint64_t* keys[2];
  std::uint32_t* positions[2];
  std::uint32_t* first_order;
  std::uint32_t* representative;
  std::uint32_t* tail;
  std::uint8_t* outcome;
  std::uint8_t* flags;
  int* tail_length;
  void* temp;
  std::size_t temp_bytes;

  regions(void* scratch, std::size_t n) {
    auto* p = static_cast<unsigned char*>(scratch);
    const auto take = [&p](std::size_t bytes) {
      void* at = p;
      p += aligned(bytes);
      return at;
    };
    hashes = static_cast<std::uint64_t*>(take(n * 8));
    keys[0] = static_cast<std::uint64_t*>(take(n * 8));
    keys[1] = static_cast<std::uint64_t*>(take(n * 8));
    positions[0] = static_cast<std::uint32_t*>(take(n * 4));
    positions[1] = static_cast<std::uint32_t*>(take(n * 4));
    first_order = static_cast<std::uint32_t*>(take(n * 4));
    representative = static_cast<std::uint32_t*>(take(n * 4));
    tail = static_cast<std::uint32_t*>(take(n * 4));
    outcome = static_cast<std::uint8_t*>(take(n));
    flags = static_cast<std::uint8_t*>(take(n));
    tail_length = static_cast<int*>(take(sizeof(int)));
    temp_bytes = std::max(sort_temp_bytes(n), select_temp_bytes(n));
    temp = take(temp_bytes);
  }

  /// Bytes from the start of the scratch to the end of the temporary storage.
  static std::size_t bytes(std::size_t n) {
    return 3 * aligned(n * 8) + 5 * aligned(n * 4) + 2 * aligned(n) + aligned(sizeof(int)) +
           aligned(std::max(sort_temp_bytes(n), select_temp_bytes(n)));
  }
};

void check_batch_size(std::size_t n) {
  if (n > sorted_max_keys)
    throw invalid_argument("unique or deterministic cuckoo adds take at most 2^30 keys per launch");
}

/// Sorts the n (key, position) pairs of step `by`; returns where the sorted pairs are.
struct sorted_pairs {
  std::uint64_t* keys;
  std::uint32_t* positions;
};

sorted_pairs sort_step(const regions& r, std::size_t n, const cuckoo_layout& l, sort_by by,
                       cudaStream_t stream) {
  launch<sort_keys_kernel>(n, stream, n, l, by, r.hashes, r.outcome, r.keys[0], r.positions[0]);
  cub::DoubleBuffer<std::uint64_t> keys(r.keys[0], r.keys[1]);
  cub::DoubleBuffer<std::uint32_t> positions(r.positions[0], r.positions[1]);
  std::size_t temp_bytes = r.temp_bytes;
  GBF_CUDA_TRY(cub::DeviceRadixSort::SortPairs(r.temp, temp_bytes, keys, positions,
                                               static_cast<int>(n), 0, 64, stream));
  return {keys.Current(), positions.Current()};
}

}  // namespace

std::size_t sorted_scratch_bytes(std::size_t max_keys) {
  check_batch_size(max_keys);
  return regions::bytes(std::max<std::size_t>(max_keys, 1));
}

void add_sorted(const table_ref& t, const key_batch& keys, cuckoo_status* status, bool unique,
                bool deterministic, void* scratch, std::size_t scratch_bytes, cudaStream_t stream) {
  const std::size_t n = keys.count;
  if (n == 0) return;
  check_batch_size(n);
  if (scratch_bytes < sorted_scratch_bytes(n))
    throw invalid_argument("add_sorted: scratch of " + std::to_string(scratch_bytes) +
                           " bytes is too small for " + std::to_string(n) + " keys");
  const regions r(scratch, n);
  const cuckoo_layout& l = t.layout;
  auto* const counters = reinterpret_cast<counter_t*>(t.counters);

  hash_keys(keys, l.seed, r.hashes, stream);
  launch<start_kernel>(n, stream, n, keys.validity, keys.validity_bit, r.outcome);
  dispatch_tag_bits(l.tag_bits, [&](auto bits) {
    constexpr std::uint32_t F = decltype(bits)::value;
    if (unique) {
      const sorted_pairs s = sort_step(r, n, l, sort_by::canonical, stream);
      launch<dedupe_kernel<F>>(n, stream, n, l, t.words, r.hashes, s.keys, s.positions,
                               r.representative, r.outcome);
    }
    if (!deterministic) {
      launch<insert_pending_kernel<F>>(n, stream, n, l, t.max_kicks,
                                       shared_table<F>{t.words, l.num_buckets}, r.hashes,
                                       r.outcome, counters);
      return;
    }
    // Round 1: primary buckets; its order is the tail's.
    const sorted_pairs first = sort_step(r, n, l, sort_by::primary, stream);
    GBF_CUDA_TRY(cudaMemcpyAsync(r.first_order, first.positions, n * sizeof(std::uint32_t),
                                 cudaMemcpyDeviceToDevice, stream));
    launch<fill_runs_kernel<F>>(n, stream, n, t.words, first.keys, first.positions, r.outcome);
    // Round 2: alternate buckets.
    const sorted_pairs second = sort_step(r, n, l, sort_by::alternate, stream);
    launch<fill_runs_kernel<F>>(n, stream, n, t.words, second.keys, second.positions, r.outcome);
    // The tail: the keys still pending, in round 1's order, on one thread.
    launch<tail_flags_kernel>(n, stream, n, r.first_order, r.outcome, r.flags);
    std::size_t temp_bytes = r.temp_bytes;
    GBF_CUDA_TRY(cub::DeviceSelect::Flagged(r.temp, temp_bytes, r.first_order, r.flags, r.tail,
                                            r.tail_length, static_cast<int>(n), stream));
    tail_kernel<F><<<1, 1, 0, stream>>>(l, t.max_kicks, t.words, r.hashes, r.tail, r.tail_length,
                                        r.outcome, counters);
    GBF_CUDA_TRY(cudaGetLastError());
  });
  launch<finish_kernel>(n, stream, n, r.representative, r.outcome, status, counters);
}

}  // namespace gbf::detail::gpu::cuckoo
