// Parquet's BloomFilterHeader over the Thrift compact protocol (host/io/thrift.hpp).
#include "host/io/thrift.hpp"

namespace gbf::detail::thrift {
namespace {

// Reads one of the header's unions, which must hold exactly one member: id 1,
// a struct (the empty BLOCK / XXHASH / UNCOMPRESSED struct, whose unknown
// fields are skipped). Any other member is an algorithm gbf does not implement.
void read_union(reader& r, const char* name, const char* member_name) {
  int members = 0;
  std::int64_t last_id = 0;
  for (auto f = r.next_field(last_id); f.type != 0; f = r.next_field(last_id)) {
    ++members;
    if (f.id != 1)
      r.malformed(std::string("unsupported Bloom filter ") + name + " (union member " +
                  std::to_string(f.id) + "; gbf reads " + member_name + " = 1)");
    if (f.type != structure)
      r.malformed(std::string(name) + " member " + member_name + " has Thrift type " +
                  std::to_string(f.type) + ", expected struct (12)");
    r.skip_struct(2);
  }
  if (members != 1)
    r.malformed(std::string(name) + " union has " + std::to_string(members) +
                " members set; exactly one is required");
}

}  // namespace

std::vector<std::uint8_t> bloom_filter_header(std::uint32_t num_bytes) {
  std::vector<std::uint8_t> out;
  out.push_back(0x10 | i32);  // field 1 (delta 1): numBytes
  put_varint(out, std::uint64_t{num_bytes} << 1);  // zigzag of a non-negative i32
  // Fields 2, 3, 4 (delta 1 each): a union whose member 1 (delta 1) is an empty
  // struct; the member's stop byte, then the union's.
  for (int field = 2; field <= 4; ++field) {
    out.push_back(0x10 | structure);
    out.push_back(0x10 | structure);
    out.push_back(0);
    out.push_back(0);
  }
  out.push_back(0);  // end of BloomFilterHeader
  return out;
}

std::uint64_t read_bloom_filter_header(byte_source& in) {
  reader r(in);
  bool seen[5] = {};
  std::int32_t num_bytes = 0;
  std::int64_t last_id = 0;
  for (auto f = r.next_field(last_id); f.type != 0; f = r.next_field(last_id)) {
    switch (f.id) {
      case 1:
        if (f.type != i32)
          r.malformed("numBytes has Thrift type " + std::to_string(f.type) + ", expected i32 (5)");
        num_bytes = r.read_i32();
        break;
      case 2:
      case 3:
      case 4: {
        static const char* const names[][2] = {
            {"algorithm", "BLOCK"}, {"hash", "XXHASH"}, {"compression", "UNCOMPRESSED"}};
        const auto& [name, member] = names[f.id - 2];
        if (f.type != structure)
          r.malformed(std::string(name) + " has Thrift type " + std::to_string(f.type) +
                      ", expected struct (12)");
        read_union(r, name, member);
        break;
      }
      default: r.skip(f.type, 1, false); continue;
    }
    seen[f.id] = true;
  }
  static const char* const required[] = {"", "numBytes (1)", "algorithm (2)", "hash (3)",
                                         "compression (4)"};
  for (int id = 1; id <= 4; ++id)
    if (!seen[id]) r.malformed(std::string("required field ") + required[id] + " is missing");
  if (num_bytes <= 0 || num_bytes % 32 != 0)
    in.fail("Parquet header says numBytes = " + std::to_string(num_bytes) +
            "; it must be a positive multiple of 32 (the block size)");
  return static_cast<std::uint64_t>(num_bytes);
}

}  // namespace gbf::detail::thrift
