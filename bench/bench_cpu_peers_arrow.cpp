// Apache Arrow C++'s parquet::BlockSplitBloomFilter as a peer of gbf's CPU
// backend (bench/bench_cpu_peers.cpp). Compiled only with GBF_PARQUET_DIR: a
// folder with include/parquet/bloom_filter.h and libparquet / libarrow (an
// Arrow C++ install, or the pyarrow wheel's package folder, which ships both).
//
// It is Parquet's SBBF, gbf's default layout: with its own hasher (XXH64 seed
// 0 through the virtual parquet::Hasher) its bits must equal gbf's. Arrow
// rounds every size up to a power of two and at most 128 MiB
// (kMaximumBloomFilterBytes), and picks its AVX2 block kernels at run time.
// Rows: one InsertHash(Hash(key)) / FindHash(Hash(key)) per key (what a
// Parquet writer or reader does per value); the batch add Hashes() +
// InsertHashes(); and the per-key calls with gbf's inline xxh64 instead of the
// virtual hasher (the same hash values: it isolates the cost of the call).
#include <arrow/buffer.h>
#include <arrow/io/memory.h>
#include <arrow/memory_pool.h>
#include <arrow/util/config.h>
#include <parquet/bloom_filter.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "bench/bench_cpu_peers.hpp"
#include "gbf/hash.hpp"

namespace gbf_bench {
namespace {

enum class arrow_call { per_key, batch, gbf_hash };

template <arrow_call Call>
class arrow_filter final : public peer_filter {
 public:
  explicit arrow_filter(std::uint64_t num_blocks) {
    f_.Init(static_cast<std::uint32_t>(num_blocks * 32));
    if (f_.GetBitsetSize() != num_blocks * 32)
      throw std::runtime_error("Arrow changed the filter size");
  }

  void add(const std::uint64_t* keys, std::size_t n) override {
    const auto* values = reinterpret_cast<const std::int64_t*>(keys);
    if constexpr (Call == arrow_call::batch) {
      // Arrow's batch calls take an int count: 64 Ki values a call through a
      // stack buffer, as a column writer does per page.
      constexpr int step = 1 << 16;
      std::vector<std::uint64_t> hashes(step);
      for (std::size_t i = 0; i < n; i += step) {
        const int m = static_cast<int>(std::min<std::size_t>(step, n - i));
        f_.Hashes(values + i, m, hashes.data());
        f_.InsertHashes(hashes.data(), m);
      }
    } else if constexpr (Call == arrow_call::gbf_hash) {
      for (std::size_t i = 0; i < n; ++i) f_.InsertHash(gbf::hash_key(keys[i], 0));
    } else {
      for (std::size_t i = 0; i < n; ++i) f_.InsertHash(f_.Hash(values[i]));
    }
  }

  void contains(const std::uint64_t* keys, std::size_t n, bool* found) const override {
    const auto* values = reinterpret_cast<const std::int64_t*>(keys);
    if constexpr (Call == arrow_call::gbf_hash) {
      for (std::size_t i = 0; i < n; ++i) found[i] = f_.FindHash(gbf::hash_key(keys[i], 0));
    } else {
      for (std::size_t i = 0; i < n; ++i) found[i] = f_.FindHash(f_.Hash(values[i]));
    }
  }

  // WriteTo writes the Thrift header, then the bitset: the bitset is the tail.
  std::vector<std::uint32_t> words() const override {
    auto sink = arrow::io::BufferOutputStream::Create().ValueOrDie();
    f_.WriteTo(sink.get());
    const auto buffer = sink->Finish().ValueOrDie();
    const std::uint64_t bytes = f_.GetBitsetSize();
    if (static_cast<std::uint64_t>(buffer->size()) < bytes) return {};
    std::vector<std::uint32_t> out(bytes / 4);
    std::memcpy(out.data(), buffer->data() + (buffer->size() - bytes), bytes);
    return out;
  }

 private:
  parquet::BlockSplitBloomFilter f_;
};

template <class Filter>
std::unique_ptr<peer_filter> make(std::uint64_t num_blocks) {
  return std::make_unique<Filter>(num_blocks);
}

}  // namespace

std::vector<peer_row> arrow_rows() {
  const std::uint64_t max_bytes = parquet::BlockSplitBloomFilter::kMaximumBloomFilterBytes;
  return {
      {"Arrow BlockSplitBloomFilter, its XXH64 hasher", false, true, max_bytes,
       &make<arrow_filter<arrow_call::per_key>>},
      {"Arrow BlockSplitBloomFilter Hashes+InsertHashes", true, true, max_bytes,
       &make<arrow_filter<arrow_call::batch>>},
      {"Arrow BlockSplitBloomFilter, gbf's inline xxh64", false, true, max_bytes,
       &make<arrow_filter<arrow_call::gbf_hash>>},
  };
}

std::string arrow_source() { return std::string("Arrow C++ ") + ARROW_VERSION_STRING; }

}  // namespace gbf_bench
