// Layouts in messages, shared by every place that refuses to combine two of them.
#pragma once

#include <string>

#include "gbf/layout.hpp"

namespace gbf::detail {

/// The fields where a and b differ, e.g. "words_per_block 8 vs 16, num_blocks 100 vs 50".
std::string layout_differences(const layout& a, const layout& b);

}  // namespace gbf::detail
