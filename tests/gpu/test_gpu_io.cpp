// The file formats with GPU filters: a GPU filter saves the same bytes as a
// CPU filter holding the same keys, loads back onto the GPU, and exports the
// same Parquet bytes as its CPU copy. Skips without a GPU (gbf::test::gpu_test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test.hpp"
#include "tests/io/io_support.hpp"
#include "tests/support.hpp"
#include "gbf/filter.hpp"
#include "gbf/io.hpp"

namespace gbf {
namespace {

using test::filled_filter;
using test::layout_of;
using test::on_gpu;
using test::read_all;
using test::temp_dir;

using GpuFileFormat = test::gpu_test;

TEST_F(GpuFileFormat, SaveAndLoadFileRoundTripOnGpu) {
  temp_dir dir;
  const std::string path = dir.file("gpu.gbf");
  const filter f = filled_filter(layout_of(8, 8, 1024), on_gpu());
  ASSERT_EQ(f.where(), backend::gpu);
  save(f, path, 0.01);
  file_metadata meta;
  const filter g = load(path, on_gpu(), &meta);
  EXPECT_EQ(g.where(), backend::gpu);
  EXPECT_EQ(g.words(), f.words());
  EXPECT_EQ(g.layout(), f.layout());
  EXPECT_EQ(g.capacity(), f.capacity());
  EXPECT_EQ(meta.keys_inserted, 300u);
  // The same keys on the CPU give the same file.
  EXPECT_EQ(serialize(filled_filter(layout_of(8, 8, 1024)), 0.01), read_all(path));
  // And a GPU filter exports the same Parquet bytes as its CPU copy.
  EXPECT_EQ(to_parquet_sbbf(g), to_parquet_sbbf(g.copy_to(backend::cpu)));
}

// Saves stream the words in slices (filter::copy_words): a slice of a GPU
// filter is the same slice of words(), the tail of a word count not a multiple
// of the slice included.
TEST_F(GpuFileFormat, CopyWordsOfAGpuFilterAreSlicesOfItsWords) {
  const filter f = filled_filter(layout_of(8, 8, 70'001), on_gpu());  // 560,008 words: 8 slices + a tail
  ASSERT_EQ(f.where(), backend::gpu);
  test::expect_slices_of(f.words(), [&](std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
    f.copy_words(first, count, out);
  });
  EXPECT_EQ(serialize(f, 0.01), serialize(f.copy_to(backend::cpu), 0.01));
}

}  // namespace
}  // namespace gbf
