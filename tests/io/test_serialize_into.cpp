// serialize_into writes serialize()'s bytes into a caller's buffer of exactly
// serialized_size() bytes, for every kind, and refuses any other buffer.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "gbf/counting_filter.hpp"
#include "gbf/cuckoo_filter.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/io.hpp"
#include "gbf/scaling_filter.hpp"
#include "tests/support.hpp"

namespace gbf::test {
namespace {

/// serialize_into(f, buffer, size, extra...) matches serialize(f, extra...) and the
/// size; a buffer one byte short or long, or null, is refused before anything is written.
template <class Filter, class... Extra>
void expect_serialize_into_matches(const Filter& f, Extra... extra) {
  const std::vector<std::uint8_t> expected = serialize(f, extra...);
  ASSERT_EQ(serialized_size(f), expected.size());
  std::vector<std::uint8_t> out(expected.size() + 1, 0xab);
  serialize_into(f, out.data(), expected.size(), extra...);
  EXPECT_EQ(std::vector<std::uint8_t>(out.begin(), out.end() - 1), expected);
  EXPECT_EQ(out.back(), 0xab) << "wrote past the buffer";
  std::vector<std::uint8_t> untouched(expected.size() + 1, 0xcd);
  for (const std::size_t size : {expected.size() - 1, expected.size() + 1, std::size_t{0}}) {
    try {
      serialize_into(f, untouched.data(), size, extra...);
      ADD_FAILURE() << "a buffer of " << size << " bytes for " << expected.size();
    } catch (const invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("serializes to " + std::to_string(expected.size())),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(untouched, std::vector<std::uint8_t>(expected.size() + 1, 0xcd));
  EXPECT_THROW(serialize_into(f, nullptr, expected.size(), extra...), invalid_argument);
}

TEST(SerializeInto, EveryKindWritesSerializesBytesIntoTheCallersBuffer) {
  const auto keys = random_keys<std::uint64_t>(3'000, 17);
  for (const std::uint64_t capacity : {1ull, 100ull, 5'000ull}) {
    filter plain = filter::create(capacity, 0.01, on_cpu(1));
    plain.add(keys.data(), keys.size());
    expect_serialize_into_matches(plain, 0.01);
    expect_serialize_into_matches(plain, 0.0);

    counting_filter counting = counting_filter::create(capacity, 0.02, on_cpu(1));
    counting.add(keys.data(), keys.size());
    expect_serialize_into_matches(counting, 0.02);

    cuckoo_filter cuckoo = cuckoo_filter::create(capacity + 3'000, 0.001, on_cpu(1));
    cuckoo.add(keys.data(), keys.size());
    expect_serialize_into_matches(cuckoo, 0.001);

    // A chain of several levels: the fields grow with them.
    scaling_filter chain = scaling_filter::create(capacity, 0.01, {}, on_cpu(1));
    chain.add(keys.data(), keys.size());
    expect_serialize_into_matches(chain);
  }
  filter plain = filter::create(100, 0.01, on_cpu(1));
  std::vector<std::uint8_t> out(serialized_size(plain));
  EXPECT_THROW(serialize_into(plain, out.data(), out.size(), 1.5), invalid_argument);
}

}  // namespace
}  // namespace gbf::test
