// Doubles in messages: "%.6g" (1e-08, 0.01), not std::to_string's fixed six
// decimals, which print every fpp below 5e-7 as "0.000000".
#pragma once

#include <cstdio>
#include <string>

namespace gbf::detail {

/// v with `digits` significant digits (17: every double reads back exactly).
inline std::string number_text(double v, int digits = 6) {
  char text[40];
  std::snprintf(text, sizeof text, "%.*g", digits, v);
  return text;
}

}  // namespace gbf::detail
