// Writing a CPU batch with threads that each own a slice of the blocks, for
// the counting filter's add and removes, whose writes must be exact without
// atomics. (The plain filter's add partitions the batch by owner after one
// hashing pass instead: host/cpu/bloom_backend.cpp.)
//
// Blocks are independent, so thread t owns blocks [t*B/T, (t+1)*B/T), reads
// the hashes of the whole batch in order and handles the keys that land in its
// blocks. Each thread then sees exactly the keys of its blocks in batch order,
// which is what one thread walking the batch does to those blocks, and no two
// threads write the same word. The hashes are computed once, in parallel,
// beforehand, a bounded chunk at a time (chunks run one after another, which
// keeps batch order).
#pragma once

#include <algorithm>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "gbf/error.hpp"
#include "gbf/keys.hpp"
#include "host/cpu/key_loop.hpp"
#include "host/cpu/threads.hpp"

namespace gbf::detail::cpu {

/// Hashes the block-owning threads keep at a time (32 MiB), bounding their
/// scratch memory whatever the batch size.
inline constexpr std::uint64_t owned_chunk_keys = std::uint64_t{1} << 22;

/// A scratch array of `count` hashes; allocation_error naming `what` when it does not fit.
inline std::vector<std::uint64_t> scratch_hashes(std::uint64_t count, const char* what) {
  try {
    return std::vector<std::uint64_t>(count);
  } catch (const std::bad_alloc&) {
    const std::uint64_t bytes = count * sizeof(std::uint64_t);
    throw allocation_error("cannot allocate " + std::to_string(bytes) +
                               " bytes of scratch hashes for " + what,
                           bytes);
  }
}

/// One thread's share of one chunk of a block-owned pass: keys [0, count) of the
/// chunk, hashed in `hashes`, are keys [first, first + count) of the batch; the
/// thread owns blocks [first_block, first_block + owned_blocks).
struct owned_share {
  stored_hashes hashes;
  std::size_t first;
  std::size_t count;
  std::uint64_t first_block;
  std::uint64_t owned_blocks;
};

/// Runs visit(part, share) for every chunk of the host batch `keys` (hashed with
/// `seed`) on `parts` threads owning even slices of `num_blocks` blocks (see the
/// file comment). `what` names the operation in an allocation error.
template <class Visit>
void run_block_owned(const key_batch& keys, std::uint64_t seed, unsigned parts,
                     std::uint64_t num_blocks, const char* what, const Visit& visit) {
  with_hashes(keys, seed, [&](auto hash_of) {
    std::vector<std::uint64_t> hashes =
        scratch_hashes(std::min<std::uint64_t>(keys.count, owned_chunk_keys), what);
    for (std::size_t chunk = 0; chunk < keys.count; chunk += owned_chunk_keys) {
      const std::size_t chunk_keys = std::min<std::size_t>(keys.count - chunk, owned_chunk_keys);
      key_batch piece = keys;  // the chunk's keys, for a work-balanced hashing split
      piece.count = chunk_keys;
      if (keys.is_string())
        piece.offsets =
            static_cast<const unsigned char*>(keys.offsets) + chunk * offset_bytes(keys.kind);
      run_in_ranges(key_bounds(piece, parts), [&](unsigned, std::uint64_t begin, std::uint64_t end) {
        for (std::size_t i = begin; i < end; ++i) hashes[i] = hash_of(chunk + i);
      });
      run_in_parts(parts, num_blocks, [&](unsigned part, std::uint64_t first_block,
                                          std::uint64_t end_block) {
        visit(part, owned_share{stored_hashes{hashes.data()}, chunk, chunk_keys, first_block,
                                end_block - first_block});
      });
    }
  });
}

}  // namespace gbf::detail::cpu
