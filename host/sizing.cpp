// Sizing math; the model is stated in include/gbf/sizing.hpp.
#include "gbf/sizing.hpp"

#include <math.h>  // lgamma_r, the reentrant lgamma

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "gbf/error.hpp"
#include "host/number_text.hpp"

namespace gbf {
namespace {

// ln(31/32): the log-probability that one probe misses a given bit of its word.
const double log_bit_miss = std::log1p(-1.0 / bits_per_word);

// Probes per word come in at most two counts: ceil(k/W) for the first k mod W
// words and floor(k/W) >= 1 (k >= W) for the rest.
struct probe_split {
  std::uint32_t words_hi, probes_hi;  // words with ceil(k/W) probes
  std::uint32_t words_lo, probes_lo;  // words with floor(k/W) probes
};

probe_split split_probes(const layout& l) {
  const std::uint32_t w = l.words_per_block, k = l.bits_per_key;
  return {k % w, k / w + 1, w - k % w, k / w};
}

// Occupancy of one 32-bit word: the number X of distinct bits that m
// independent uniform probes set (32 bins after m balls). occupancy()[m][x] is
// P(X = x) for m < occupancy_rows, from the forward recurrence
//   P_{m+1}(x) = P_m(x) x/32 + P_m(x-1) (33 - x)/32,
// which only adds positive terms, so no precision is lost to cancellation.
constexpr std::uint32_t occupancy_rows = 256;
using occupancy_row = std::array<double, bits_per_word + 1>;

const std::vector<occupancy_row>& occupancy() {
  static const std::vector<occupancy_row> table = [] {
    std::vector<occupancy_row> rows(occupancy_rows);
    rows[0].fill(0.0);
    rows[0][0] = 1.0;
    for (std::uint32_t m = 1; m < occupancy_rows; ++m) {
      rows[m][0] = 0.0;
      for (std::uint32_t x = 1; x <= bits_per_word; ++x)
        rows[m][x] = rows[m - 1][x] * x / bits_per_word +
                     rows[m - 1][x - 1] * (bits_per_word + 1 - x) / bits_per_word;
    }
    return rows;
  }();
  return table;
}

// P(a query's c probes into a word all land on set bits | m probes of stored
// keys hit that word) = E[(X/32)^c], X the word's occupancy after m probes.
//
// c = 1 is 1 - (31/32)^m. For c > 1 this is NOT (1 - (31/32)^m)^c, the
// "c distinct bits, each set independently" shortcut: by Jensen's inequality
// E[(X/32)^c] > (E[X]/32)^c, because the query's probes may coincide (it needs
// fewer distinct bits) and a word's fill varies. The shortcut undershot the
// FPR of k > W layouts by up to 80% at fpp 1% (docs/layout.md has the table).
//
// Small m: the occupancy table. m >= occupancy_rows: inclusion-exclusion over
// the d distinct bits the query needs,
//   P(d given bits all set after m probes) = sum_i (-1)^i C(d,i) (1 - i/32)^m,
// mixed over P(c probes hit d distinct bits) = occupancy()[c][d]. There every
// term with i >= 1 is at most 32 (31/32)^256 < 0.01 times the one before, so
// the alternating sum is as accurate as its first term.
double word_fpr(std::uint32_t c, double m) {
  if (c == 1) return -std::expm1(m * log_bit_miss);
  // 1 - E[(X/32)^c] <= c (31/32)^m < 1e-18 past this: 1 to double precision.
  if (m * -log_bit_miss > 45.0) return 1.0;
  const auto& table = occupancy();
  if (m < occupancy_rows) {
    const occupancy_row& row = table[static_cast<std::size_t>(m)];
    double total = 0;
    for (std::uint32_t x = 1; x <= bits_per_word; ++x)
      total += row[x] * std::pow(static_cast<double>(x) / bits_per_word, static_cast<double>(c));
    return total;
  }
  std::array<double, bits_per_word + 1> miss_all;  // (1 - i/32)^m: probes avoid i given bits
  for (std::uint32_t i = 0; i <= bits_per_word; ++i)
    miss_all[i] = std::exp(m * std::log1p(-static_cast<double>(i) / bits_per_word));
  double total = 0;
  for (std::uint32_t d = 1; d <= c; ++d) {
    double all_set = 0, binomial = 1;  // binomial = C(d, i)
    for (std::uint32_t i = 0; i <= d; ++i) {
      const double term = binomial * miss_all[i];
      all_set += (i % 2 == 0) ? term : -term;
      binomial = binomial * (d - i) / (i + 1);
    }
    total += table[c][d] * all_set;
  }
  return total;
}

// P(a random absent key's bits are all set | its block holds j keys). Given j
// the words fill independently: word w receives j c_w probes and the query
// needs its own c_w probes there to hit set bits.
double block_fpr(const probe_split& s, double j) {
  auto word_term = [j](std::uint32_t probes) { return std::log(word_fpr(probes, j * probes)); };
  double log_fpr = 0;
  if (s.words_hi > 0) log_fpr += s.words_hi * word_term(s.probes_hi);
  log_fpr += s.words_lo * word_term(s.probes_lo);
  return std::exp(log_fpr);
}

[[noreturn]] void reject(const std::string& what) { throw invalid_argument(what); }

// The models below divide by num_blocks and split k over W words: an invalid
// layout would give a number, not an error.
void require_valid(const layout& l, const char* function) {
  if (const char* problem = layout_problem(l)) reject(std::string(function) + ": invalid layout: " + problem);
}

}  // namespace

double expected_fpr(const layout& l, double num_keys) {
  require_valid(l, "expected_fpr");
  if (!(num_keys > 0)) return 0.0;
  if (std::isinf(num_keys)) return 1.0;  // estimate_distinct_keys of a full filter
  const probe_split s = split_probes(l);
  const double lambda = num_keys / static_cast<double>(l.num_blocks);
  // The mixture spreads over about sqrt(lambda) terms each side of the mode, and
  // j += 1 stops moving once j passes 2^53. Past 2^20 keys a block (a block of at
  // most 512 bits is full long before) the spread, a 1e-3 relative width, is
  // invisible against the block FPR at the mean, which is 1 to double precision.
  if (lambda > 0x1p20) return std::min(1.0, block_fpr(s, lambda));
  // Sum the Poisson(lambda) mixture outward from the mode. Above the mode the
  // block FPR (at most 1) grows with j, so stop once the pmf p_j is negligible
  // against the total (the rest of the tail is at most p_j / (1 - lambda/(j+1))):
  // a relative bound, which the tiny FPRs of wide blocks with many bits per key
  // need (an absolute cut-off of 1e-18 was off by 1e-6 at FPRs near 1e-27).
  // Below the mode the block FPR only falls, so an absolute cut-off suffices.
  constexpr double negligible = 1e-18;
  const double mode = std::floor(lambda);
  // lgamma_r: std::lgamma writes the global signgam, a data race when threads size filters at once.
  auto log_pmf = [lambda](double j) {
    int sign = 0;
    return -lambda + j * std::log(lambda) - ::lgamma_r(j + 1, &sign);
  };
  double total = 0;
  for (double j = mode;; j += 1) {
    const double p = std::exp(log_pmf(j));
    total += p * block_fpr(s, j);
    if (j > lambda && (p < negligible * total || p == 0)) break;
  }
  for (double j = mode - 1; j >= 0; j -= 1) {
    const double p = std::exp(log_pmf(j));
    total += p * block_fpr(s, j);
    if (p < negligible) break;
  }
  return std::min(total, 1.0);  // the pmf's rounding may sum to 1 + 1e-8
}

layout size_for(std::uint64_t capacity, double fpp, const shape& s) {
  if (capacity == 0) reject("capacity must be at least 1 key");
  if (std::isnan(fpp)) reject("fpp is NaN; it must be a probability in (0, 1)");
  if (!(fpp > 0.0 && fpp < 1.0)) reject("fpp must be in (0, 1), got " + detail::number_text(fpp));
  layout l;
  l.words_per_block = s.words_per_block;
  l.bits_per_key = s.bits_per_key;
  l.seed = s.seed;
  if (const char* problem = layout_problem(l)) reject(std::string("invalid shape: ") + problem);

  const double n = static_cast<double>(capacity);
  auto fpr_with = [&](std::uint64_t num_blocks) {
    layout candidate = l;
    candidate.num_blocks = num_blocks;
    return expected_fpr(candidate, n);
  };
  if (fpr_with(max_num_blocks) > fpp) {
    const double block_bytes = static_cast<double>(l.words_per_block) * bytes_per_word;
    reject("capacity " + std::to_string(capacity) + " at fpp " + detail::number_text(fpp) +
           " needs more than 2^32 blocks (" + detail::number_text(block_bytes * 4294967296.0 / 1073741824.0) +
           " GiB), the largest filter gbf can address; lower the capacity or raise fpp");
  }
  // The FPR falls monotonically as blocks are added (fewer keys per block), so
  // binary-search the smallest num_blocks that meets the target. The search of
  // the whole range [1, 2^32] made filter::create(1000, 0.01) take 39 us (Zen 5
  // VM; 28 us bracketed), most of it in this model, so first bracket the answer near a
  // classic Bloom filter's size, the blocked one's is a little larger (10.5
  // against 9.6 bits per key at 1%, default layout), stepping by 8x outward
  // until the bracket holds (a deep scaling level may need 100x the classic
  // size). Invariant of the search: fpr(hi) <= fpp and, unless lo = 1, fpr(lo - 1) > fpp.
  const double block_bits = static_cast<double>(l.words_per_block) * 32;
  const double guess = std::ceil(n * classic_bits_per_key(fpp) / block_bits);
  std::uint64_t lo = 1, hi = max_num_blocks;
  if (guess < static_cast<double>(max_num_blocks)) {
    std::uint64_t probe = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(guess));
    if (fpr_with(probe) <= fpp) {
      hi = probe;
      while (hi > 1) {  // down until too small: that is lo - 1
        const std::uint64_t lower = std::max<std::uint64_t>(1, hi / 8);
        if (fpr_with(lower) > fpp) {
          lo = lower + 1;
          break;
        }
        hi = lower;
      }
    } else {
      lo = probe + 1;
      while (lo <= max_num_blocks / 8) {  // up until large enough: that is hi
        const std::uint64_t higher = (lo - 1) * 8;
        if (fpr_with(higher) <= fpp) {
          hi = higher;
          break;
        }
        lo = higher + 1;
      }
    }
  }
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (fpr_with(mid) <= fpp) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  l.num_blocks = lo;
  return l;
}

double classic_bits_per_key(double fpp) {
  if (!(fpp > 0.0 && fpp < 1.0)) reject("fpp must be in (0, 1), got " + detail::number_text(fpp));
  const double ln2 = std::log(2.0);
  return -std::log(fpp) / (ln2 * ln2);
}

double bits_per_key_at(const layout& l, std::uint64_t capacity) {
  if (capacity == 0) reject("capacity must be at least 1 key");
  return static_cast<double>(l.num_bits()) / static_cast<double>(capacity);
}

double estimate_distinct_keys(const layout& l, std::uint64_t bits_set) {
  require_valid(l, "estimate_distinct_keys");
  const double num_bits = static_cast<double>(l.num_bits());
  if (bits_set == 0) return 0.0;
  if (static_cast<double>(bits_set) >= num_bits) return std::numeric_limits<double>::infinity();
  const probe_split s = split_probes(l);
  const double num_blocks = static_cast<double>(l.num_blocks);
  // One key hits a given bit of word w of a given block with probability
  // q_w = (1 - (31/32)^c_w) / num_blocks; ln(1 - q_w) per key.
  auto log_keep = [&](std::uint32_t probes) {
    return std::log1p(-(-std::expm1(probes * log_bit_miss)) / num_blocks);
  };
  const double unset_fraction = 1.0 - static_cast<double>(bits_set) / num_bits;
  const double log_keep_lo = log_keep(s.probes_lo);
  // k a multiple of W: every word has k/W probes and unset_fraction = (1 - q)^n.
  if (s.words_hi == 0) return std::log(unset_fraction) / log_keep_lo;
  // Two probe counts: the expected unset fraction is a mix of two exponentials
  // in n, decreasing in n; bisect.
  const double frac_hi = static_cast<double>(s.words_hi) / l.words_per_block;
  const double log_keep_hi = log_keep(s.probes_hi);
  auto unset_after = [&](double n) {
    return frac_hi * std::exp(n * log_keep_hi) + (1.0 - frac_hi) * std::exp(n * log_keep_lo);
  };
  double lo = 0, hi = 1;
  while (unset_after(hi) > unset_fraction) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-9 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (unset_after(mid) > unset_fraction ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

double estimate_standard_error(const layout& l, double num_keys) {
  require_valid(l, "estimate_standard_error");
  if (!(num_keys > 0)) return 0.0;
  if (std::isinf(num_keys)) return num_keys;  // a full filter's estimate is unbounded
  const probe_split s = split_probes(l);
  const double n = num_keys;
  const double num_blocks = static_cast<double>(l.num_blocks);
  // The words of a block in (at most) two classes by probe count c.
  struct word_class {
    double words;     // words of this class per block
    double miss;      // a = (31/32)^c: one key in the block misses a given bit
    double hit;       // q = (1 - a) / num_blocks: one key sets a given bit of this word
    double hit_both;  // 1 - 2a + (30/32)^c: one key in the block sets two given bits
    double unset;     // p = (1 - q)^n: a given bit is still clear
  };
  word_class classes[2];
  int num_classes = 0;
  auto add_class = [&](std::uint32_t words, std::uint32_t probes) {
    if (words == 0) return;
    word_class& w = classes[num_classes++];
    w.words = words;
    w.miss = std::exp(probes * log_bit_miss);
    w.hit = -std::expm1(probes * log_bit_miss) / num_blocks;
    w.hit_both = 1 - 2 * w.miss + std::exp(probes * std::log1p(-2.0 / bits_per_word));
    w.unset = std::exp(n * std::log1p(-w.hit));
  };
  add_class(s.words_hi, s.probes_hi);
  add_class(s.words_lo, s.probes_lo);

  // Var(U) of the unset-bit count U = sum of the bits' "clear" indicators, as
  // sums of covariances over pairs of bits; for each pair P(both clear) is
  // (1 - P(one key sets either))^n, written as p_1 p_2 (1 + r)^n so that the
  // small r is formed without cancellation.
  const double b = bits_per_word;
  auto cov = [n](double p1, double p2, double r) { return p1 * p2 * std::expm1(n * std::log1p(r)); };
  double same_block = 0, other_block = 0;
  for (int x = 0; x < num_classes; ++x) {
    const word_class& w = classes[x];
    // One bit with itself, and two bits of one word (r = (hit_both/B - q^2) / (1 - q)^2).
    same_block += w.words * b * w.unset * (1 - w.unset);
    const double r_word = (w.hit_both / num_blocks - w.hit * w.hit) / ((1 - w.hit) * (1 - w.hit));
    same_block += w.words * b * (b - 1) * cov(w.unset, w.unset, r_word);
    for (int y = 0; y < num_classes; ++y) {
      const word_class& v = classes[y];
      const double both = (1 - w.hit) * (1 - v.hit);
      // Two words of one block: r = q_w q_v (B - 1) / ((1 - q_w)(1 - q_v)).
      const double word_pairs = w.words * (x == y ? v.words - 1 : v.words);
      same_block += word_pairs * b * b * cov(w.unset, v.unset, w.hit * v.hit * (num_blocks - 1) / both);
      // Two blocks: r = -q_w q_v / ((1 - q_w)(1 - q_v)).
      other_block += w.words * v.words * b * b * cov(w.unset, v.unset, -w.hit * v.hit / both);
    }
  }
  const double var_unset = num_blocks * same_block + num_blocks * (num_blocks - 1) * other_block;
  // The estimate inverts E[U](n) = B sum_w 32 (1 - q_w)^n; delta method.
  double slope = 0;
  for (int x = 0; x < num_classes; ++x)
    slope += num_blocks * classes[x].words * b * classes[x].unset * std::log1p(-classes[x].hit);
  return std::sqrt(std::max(var_unset, 0.0)) / std::fabs(slope);
}

}  // namespace gbf
