// A bounded stand-in for libFuzzer: feeds LLVMFuzzerTestOneInput a seeded
// stream of inputs so the fuzz target runs under CTest with any compiler.
//
//   gbf_fuzz_load_driver [iterations = 20000] [seed = 1]
//
// Inputs: random bytes; and valid native files, Parquet bitsets (with and
// without header) of several layouts, Parquet files and a bare Parquet footer,
// and scaling-chain files, mutated by byte flips, truncation, appended bytes,
// or bytes inserted into the header; native files are
// sometimes re-checksummed after the mutation so that the header checks and
// the accept path are reached, not only the checksum.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/hash.hpp"
#include "gbf/io.hpp"
#include "gbf/parquet.hpp"
#include "gbf/scaling_filter.hpp"
#include "tests/io/parquet_builder.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using bytes = std::vector<std::uint8_t>;

gbf::filter random_filter(std::mt19937_64& rng, std::uint32_t w, std::uint32_t k,
                          std::uint64_t seed, std::uint64_t num_blocks) {
  const gbf::layout l{w, k, seed, num_blocks, gbf::hash_id::xxh64};
  std::vector<std::uint32_t> words(l.num_words());
  for (auto& word : words) word = static_cast<std::uint32_t>(rng() & rng());  // ~1/4 of bits set
  gbf::options opts;
  opts.where = gbf::backend::cpu;
  opts.cpu_threads = 1;
  return gbf::filter::from_words(l, words.data(), opts, rng() % 1000);
}

// Valid inputs the mutations start from.
enum class input_kind { native, parquet_with_header, parquet_raw, parquet_file, parquet_footer, scaling };
struct seed_input {
  bytes data;
  input_kind kind;
};

std::vector<seed_input> seed_inputs(std::mt19937_64& rng) {
  std::vector<seed_input> seeds;
  for (std::uint32_t w : {1u, 2u, 4u, 8u, 16u}) {
    seeds.push_back({gbf::serialize(random_filter(rng, w, w, 0, 1), 0.01), input_kind::native});
    seeds.push_back({gbf::serialize(random_filter(rng, w, w + 1, 7, 3)), input_kind::native});
  }
  for (std::uint64_t blocks : {1u, 2u, 4u}) {
    const gbf::filter f = random_filter(rng, 8, 8, 0, blocks);
    seeds.push_back({gbf::to_parquet_sbbf(f, true), input_kind::parquet_with_header});
    seeds.push_back({gbf::to_parquet_sbbf(f, false), input_kind::parquet_raw});
  }
  // Parquet files (flat and nested schemas, filters with and without their
  // length), and a bare footer (the fuzz target wraps it into a file).
  namespace pb = gbf::test::parquet;
  pb::file_spec flat;
  flat.schema = {pb::group("schema", 2), pb::leaf("a", 1), pb::leaf("s", 6)};
  pb::file_spec nested;
  nested.schema = {pb::group("schema", 2), pb::group("user", 1), pb::leaf("id", 2), pb::leaf("a", 1)};
  for (int g = 0; g < 3; ++g) {
    pb::row_group_spec rg;
    rg.num_rows = 10 + g;
    rg.chunks.push_back(pb::chunk(pb::sbbf_with(std::vector<std::uint32_t>{1, 2, 3}, 1u << g)));
    rg.chunks.push_back(pb::chunk(pb::sbbf_with(std::vector<std::uint64_t>{4}, 1)));
    rg.chunks.back().write_length = g != 1;
    flat.row_groups.push_back(rg);
    nested.row_groups.push_back(rg);
  }
  seeds.push_back({pb::build(flat), input_kind::parquet_file});
  seeds.push_back({pb::build(nested), input_kind::parquet_file});
  pb::file_spec bare = nested;
  for (pb::row_group_spec& rg : bare.row_groups)
    for (pb::chunk_spec& c : rg.chunks) c.filter.reset();
  seeds.push_back({pb::footer(bare, {}), input_kind::parquet_footer});
  // Scaling chains (version-2 container, several levels), grown with random keys.
  for (std::uint32_t w : {2u, 8u}) {
    gbf::options cpu;
    cpu.where = gbf::backend::cpu;
    cpu.cpu_threads = 1;
    gbf::scaling_policy policy;
    policy.non_scaling = w == 2 && rng() % 2 == 0;
    gbf::scaling_filter chain = gbf::scaling_filter::create(8, 0.05, policy, cpu, {w, w, 3});
    std::vector<std::uint64_t> keys(policy.non_scaling ? 6 : 40);
    for (auto& k : keys) k = rng();
    chain.add(keys.data(), keys.size());
    seeds.push_back({gbf::serialize(chain), input_kind::scaling});
  }
  // Every seed must be accepted unmodified, or the mutations test nothing
  // (a rejection throws out of main and fails the run).
  gbf::options cpu;
  cpu.where = gbf::backend::cpu;
  gbf::parquet::read_options missing_ok;
  missing_ok.allow_missing = true;
  for (const seed_input& s : seeds) {
    if (s.kind == input_kind::native) {
      gbf::deserialize(s.data.data(), s.data.size(), cpu);
    } else if (s.kind == input_kind::parquet_file) {
      gbf::parquet::column_filters(s.data.data(), s.data.size(), "a", missing_ok);
    } else if (s.kind == input_kind::parquet_footer) {
      bytes file = {'P', 'A', 'R', '1'};
      file.insert(file.end(), s.data.begin(), s.data.end());
      for (int i = 0; i < 4; ++i) file.push_back(static_cast<std::uint8_t>(s.data.size() >> (8 * i)));
      for (char c : {'P', 'A', 'R', '1'}) file.push_back(static_cast<std::uint8_t>(c));
      gbf::parquet::column_filters(file.data(), file.size(), "user.id", missing_ok);
    } else if (s.kind == input_kind::scaling) {
      gbf::deserialize_scaling_filter(s.data.data(), s.data.size(), cpu);
    } else {
      gbf::from_parquet_sbbf(s.data.data(), s.data.size(),
                             s.kind == input_kind::parquet_with_header, cpu);
    }
  }
  return seeds;
}

void reseal(bytes& file) {
  if (file.size() < 8) return;
  const std::uint64_t sum = gbf::xxh64(file.data(), file.size() - 8, 0);
  for (int i = 0; i < 8; ++i) file[file.size() - 8 + i] = static_cast<std::uint8_t>(sum >> (8 * i));
}

bytes mutate(std::mt19937_64& rng, const std::vector<seed_input>& seeds) {
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  if (pick(8) == 0) {  // random bytes
    bytes b(pick(200));
    for (auto& x : b) x = static_cast<std::uint8_t>(rng());
    return b;
  }
  const seed_input& s = seeds[pick(seeds.size())];
  bytes b = s.data;
  switch (pick(5)) {
    case 0:  // byte flips anywhere
      for (std::size_t n = 1 + pick(4); n > 0; --n) b[pick(b.size())] ^= static_cast<std::uint8_t>(1 + pick(255));
      break;
    case 1:  // byte flips in the headers: the first 96 bytes, or a Parquet file's footer at its end
      for (std::size_t n = 1 + pick(3); n > 0; --n) {
        const std::size_t at = pick(std::min<std::size_t>(96, b.size()));
        b[s.kind == input_kind::parquet_file ? b.size() - 1 - at : at] = static_cast<std::uint8_t>(rng());
      }
      break;
    case 2:  // truncation
      b.resize(pick(b.size()));
      break;
    case 3:  // trailing bytes
      for (std::size_t n = 1 + pick(40); n > 0; --n) b.push_back(static_cast<std::uint8_t>(rng()));
      break;
    default:  // bytes inserted into the header region
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(std::min<std::size_t>(20, b.size()))),
               1 + pick(6), static_cast<std::uint8_t>(rng()));
      break;
  }
  if ((s.kind == input_kind::native || s.kind == input_kind::scaling) && pick(2) == 0) reseal(b);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  const long iterations = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 20000;
  const unsigned long seed = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 1;
  std::mt19937_64 rng(seed);
  const std::vector<seed_input> seeds = seed_inputs(rng);
  for (long i = 0; i < iterations; ++i) {
    const bytes input = mutate(rng, seeds);
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("fuzz_load: %ld inputs (seed %lu), no failure\n", iterations, seed);
  return 0;
}
