// Apache Parquet's split-block Bloom filter (SBBF): the bitset of the default
// layout, optionally after its Thrift BloomFilterHeader (docs/file-format.md).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gbf/io.hpp"
#include "gbf/sizing.hpp"
#include "host/io/atomic_file.hpp"
#include "host/io/byte_io.hpp"
#include "host/io/container.hpp"
#include "host/io/thrift.hpp"
#include "host/number_text.hpp"

namespace gbf {
namespace {

using detail::atomic_file_sink;
using detail::byte_sink;
using detail::byte_source;
using detail::file_source;
using detail::memory_source;
using detail::vector_sink;

bool is_power_of_two(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

void check_parquet_exportable(const char* what, const layout& l) {
  const std::string problem = parquet_problem(l);
  if (!problem.empty())
    throw invalid_argument(std::string(what) + ": cannot export as a Parquet SBBF: " + problem);
}

void write_parquet(const filter& f, bool with_header, byte_sink& out) {
  const layout& l = f.layout();
  if (with_header) {
    const auto header = detail::thrift::bloom_filter_header(static_cast<std::uint32_t>(l.size_bytes()));
    out.write(header.data(), header.size());
  }
  detail::write_words(f, out, nullptr);
}

/// `inner` with the bytes already read from it (`head`) put back in front; it
/// remembers the last 4 bytes read (`ends_with_parquet_magic`).
class replay_source final : public byte_source {
 public:
  replay_source(byte_source& inner, const std::uint8_t* head, std::size_t head_bytes)
      : byte_source(inner.name()), inner_(inner), head_(head), head_bytes_(head_bytes) {}
  std::size_t read(std::uint8_t* dst, std::size_t n) override {
    const std::size_t from_head = std::min(n, head_bytes_ - position_);
    if (from_head > 0) std::memcpy(dst, head_ + position_, from_head);
    position_ += from_head;
    const std::size_t got = from_head + (n > from_head ? inner_.read(dst + from_head, n - from_head) : 0);
    const std::size_t kept = sizeof tail_ - std::min(got, sizeof tail_);  // old tail bytes that stay
    std::memmove(tail_, tail_ + sizeof tail_ - kept, kept);
    std::memcpy(tail_ + kept, dst + got - (sizeof tail_ - kept), sizeof tail_ - kept);
    return got;
  }
  std::uint64_t remaining() const override { return head_bytes_ - position_ + inner_.remaining(); }
  bool ends_with_parquet_magic() const { return std::memcmp(tail_, "PAR1", sizeof tail_) == 0; }

 private:
  byte_source& inner_;
  const std::uint8_t* head_;
  std::size_t head_bytes_;
  std::size_t position_ = 0;
  std::uint8_t tail_[4] = {};
};

/// The refusal of a whole Parquet data file read as one filter.
constexpr const char* parquet_file_hint =
    "this is a Parquet data file (it begins and ends with \"PAR1\"), not a Parquet SBBF: "
    "read the filters inside it with gbf::parquet (the CLI's gbf parquet FILE --column C, "
    "with --extract to write one out)";

filter read_parquet(byte_source& source, bool with_header, const options& opts) {
  // A gbf file read as an SBBF failed its Thrift header with a puzzling message, or,
  // without a header and at a size that is a multiple of 32, loaded its container as bits.
  std::uint8_t head[sizeof detail::container_magic] = {};
  const std::size_t got = source.read(head, sizeof head);
  if (got == sizeof head && std::memcmp(head, detail::container_magic, sizeof head) == 0)
    source.fail("this is a gbf filter file (it starts with \"GBFBLOOM\"), not a Parquet SBBF: read it "
                "as a gbf file (gbf::load; the CLI's --format gbf, its default)");
  replay_source in(source, head, got);
  const bool begins_with_parquet_magic = got >= 4 && std::memcmp(head, "PAR1", 4) == 0;
  const std::uint64_t available = [&] {
    if (!with_header) return in.remaining();
    std::uint64_t num_bytes = 0;
    try {
      num_bytes = detail::thrift::read_bloom_filter_header(in);
    } catch (const format_error&) {
      if (begins_with_parquet_magic) source.fail(parquet_file_hint);
      throw;
    }
    if (in.remaining() != num_bytes)
      in.fail("the Parquet header says numBytes = " + std::to_string(num_bytes) + " but " +
              std::to_string(in.remaining()) + " bytes of bitset follow it");
    return num_bytes;
  }();
  if (available == 0 || available % 32 != 0)
    in.fail("bitset size " + std::to_string(available) +
            " bytes is not a positive multiple of 32 (the SBBF block size)" +
            (with_header ? "" : "; if a Thrift header comes first, read it with the header"));
  layout l;  // the default layout is Parquet's: W = 8, k = 8, xxh64, seed 0
  l.num_blocks = available / 32;
  if (const char* problem = layout_problem(l)) in.fail(std::string("impossible layout: ") + problem);
  filter f(l, opts);
  detail::read_words_into(f, in, nullptr);
  // Bare bits cannot be told from anything else, but a bitset that begins and
  // ends with the magic is a Parquet file (2^-64 odds for a filter's words).
  if (!with_header && begins_with_parquet_magic && in.ends_with_parquet_magic()) source.fail(parquet_file_hint);
  return f;
}

}  // namespace

std::string parquet_problem(const layout& l) {
  if (const char* problem = layout_problem(l)) return std::string("invalid layout: ") + problem;
  std::vector<std::string> problems;
  if (l.words_per_block != 8)
    problems.push_back("words_per_block is " + std::to_string(l.words_per_block) +
                       ", Parquet needs 8");
  if (l.bits_per_key != 8)
    problems.push_back("bits_per_key is " + std::to_string(l.bits_per_key) + ", Parquet needs 8");
  if (l.seed != 0) problems.push_back("seed is " + std::to_string(l.seed) + ", Parquet needs 0");
  const std::uint64_t bytes = l.size_bytes();
  if (!is_power_of_two(bytes))
    problems.push_back("size " + std::to_string(bytes) + " bytes is not a power of two");
  if (bytes < parquet_min_bytes)
    problems.push_back("size " + std::to_string(bytes) + " bytes is below Parquet's 32-byte minimum");
  if (bytes > parquet_max_bytes)
    problems.push_back("size " + std::to_string(bytes) +
                       " bytes exceeds Parquet's 128 MiB maximum (134217728 bytes)");
  std::string joined;
  for (const std::string& p : problems) joined += (joined.empty() ? "" : "; ") + p;
  return joined;
}

layout parquet_compatible_layout(std::uint64_t capacity, double fpp) {
  layout l = size_for(capacity, fpp);  // the default shape is Parquet's
  const std::uint64_t needed = l.size_bytes();
  if (needed > parquet_max_bytes)
    throw invalid_argument("parquet_compatible_layout: " + std::to_string(capacity) +
                           " keys at fpp " + detail::number_text(fpp) + " need " +
                           std::to_string(needed) +
                           " bytes, more than Parquet's 128 MiB maximum (134217728 bytes)");
  std::uint64_t bytes = parquet_min_bytes;
  while (bytes < needed) bytes <<= 1;
  l.num_blocks = bytes / 32;
  return l;
}

std::vector<std::uint8_t> to_parquet_sbbf(const filter& f, bool with_header) {
  f.where();  // a moved-from filter: "moved from", not a complaint about its stale layout
  check_parquet_exportable("to_parquet_sbbf", f.layout());
  vector_sink out(f.layout().size_bytes() + (with_header ? 32 : 0));
  write_parquet(f, with_header, out);
  return out.take();
}

filter from_parquet_sbbf(const std::uint8_t* data, std::size_t size, bool with_header,
                         const options& opts) {
  detail::check_buffer("from_parquet_sbbf", data, size);
  memory_source in("Parquet SBBF data", data, size);
  return read_parquet(in, with_header, opts);
}

void save_parquet_sbbf(const filter& f, const std::string& path, bool with_header) {
  f.where();  // as to_parquet_sbbf
  check_parquet_exportable("save_parquet_sbbf", f.layout());
  atomic_file_sink out(path);
  write_parquet(f, with_header, out);
  out.commit();
}

filter load_parquet_sbbf(const std::string& path, bool with_header, const options& opts) {
  file_source in(path);
  return read_parquet(in, with_header, opts);
}

}  // namespace gbf
