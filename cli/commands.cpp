// The gbf subcommands: create, build, add, query, info, merge, intersect, xor.
#include "cli/commands.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>
#include <optional>
#include <vector>

#include "cli/command_support.hpp"
#include "cli/counting.hpp"
#include "cli/cuckoo.hpp"
#include "cli/progress.hpp"
#include "cli/text.hpp"
#include "gbf/files.hpp"
#include "gbf/io.hpp"

namespace gbf::cli {
namespace {

// ---------------------------------------------------------------------------
// Filters and their files
// ---------------------------------------------------------------------------

}  // namespace

options make_options(const run_options& run) {
  options opts;
  opts.where = run.where;
  opts.cpu_threads = run.threads;
  return opts;
}

/// Loads `file`; Parquet files carry no capacity, fpp or key count (metadata 0 = unknown).
filter load_filter(const filter_file& file, const run_options& run, file_metadata& meta) {
  try {
    if (file.format == filter_format::gbf) return load(file.path, make_options(run), &meta);
    filter f = load_parquet_sbbf(file.path, file.parquet_header, make_options(run));
    meta = file_metadata{f.layout(), 0, 0, 0};
    return f;
  } catch (const std::bad_alloc&) {
    throw io_error("'" + file.path + "': out of memory loading the filter: " + std::strerror(ENOMEM), ENOMEM);
  }
}

namespace {

// ---------------------------------------------------------------------------
// Outputs: never over an input, one writer at a time
// ---------------------------------------------------------------------------

}  // namespace

/// usage_error when the output `path` exists and is, after links, the same file
/// (device and inode) as one of `inputs`: writing it would destroy an input.
/// Runs before anything is opened for writing. "-" is standard input.
void refuse_output_over_inputs(const std::string& option, const std::string& path,
                               std::initializer_list<input_file> inputs) {
  struct stat out {};
  if (::stat(path.c_str(), &out) != 0) return;  // not there yet (or unreadable: the save reports it)
  for (const input_file& in : inputs) {
    struct stat st {};
    const int rc = in.path == "-" ? ::fstat(STDIN_FILENO, &st) : ::stat(in.path.c_str(), &st);
    if (rc == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino)
      throw usage_error(option + " '" + path + "' is the same file as " + in.role + " '" + in.path +
                        "'; refusing to overwrite an input (write to another file)");
  }
}

/// Throws invalid_argument naming `file` and every condition a Parquet export of `l` fails.
void check_exportable(const layout& l, const filter_file& file) {
  if (file.format != filter_format::parquet_sbbf) return;
  const std::string problem = parquet_problem(l);
  if (!problem.empty())
    throw invalid_argument("'" + file.path + "': cannot export as a Parquet SBBF: " + problem +
                           " (size a new filter with --parquet-compatible)");
}

void save_filter(const filter& f, const filter_file& file, double fpp) {
  check_exportable(f.layout(), file);
  if (file.format == filter_format::gbf)
    save(f, file.path, fpp);
  else
    save_parquet_sbbf(f, file.path, file.parquet_header);
}

layout size_layout(const sizing_options& sizing, std::uint64_t capacity) {
  try {
    return sizing.parquet_compatible ? parquet_compatible_layout(capacity, sizing.fpp)
                                     : size_for(capacity, sizing.fpp, sizing.s);
  } catch (const invalid_argument& e) {
    throw usage_error(e.what());
  }
}

namespace {

/// "cpu" or "gpu": where the filter's batches ran.
template <class Filter>
std::string ran_on(const Filter& f) { return to_string(f.where()); }

std::string estimated_keys_text(const filter_stats& s) {
  return gbf::cli::estimated_keys_text(s.estimated_keys, "every bit is set");
}

void warn_if_over_capacity(const filter& f, const std::string& path) {
  const filter_stats s = f.stats();
  if (!s.over_capacity) return;
  std::fprintf(stderr,
               "gbf: warning: '%s' is over capacity: estimated distinct keys %s in a filter "
               "sized for %s; its false-positive rate is now %.3g%%\n",
               path.c_str(), estimated_keys_text(s).c_str(),
               with_commas(s.capacity).c_str(), 100 * s.estimated_fpr);
}

// ---------------------------------------------------------------------------
// One chunk of keys against a filter
// ---------------------------------------------------------------------------

}  // namespace

string_keys<std::int64_t> text_keys(const key_chunk& c) {
  return {c.text_data.data(), c.text_data.size(), c.offsets.data(), c.size(), nullptr};
}

namespace {

// The key loops below take any filter kind with gbf::filter's add, contains and
// verify_contains (gbf::filter, gbf::scaling_filter).
template <class Filter>
void add_chunk(Filter& f, const key_chunk& c) {
  switch (c.type) {
    case key_type::u32: f.add(c.u32.data(), c.u32.size()); return;
    case key_type::u64: f.add(c.u64.data(), c.u64.size()); return;
    case key_type::text: f.add(text_keys(c)); return;
  }
}

template <class Filter>
void contains_chunk(const Filter& f, const key_chunk& c, bool* found) {
  switch (c.type) {
    case key_type::u32: return f.contains(c.u32.data(), c.u32.size(), found);
    case key_type::u64: return f.contains(c.u64.data(), c.u64.size(), found);
    case key_type::text: return f.contains(text_keys(c), found);
  }
}

template <class Filter>
verify_report verify_chunk(const Filter& f, const key_chunk& c, const bool* found) {
  switch (c.type) {
    case key_type::u32: return f.verify_contains(c.u32.data(), c.u32.size(), found);
    case key_type::u64: return f.verify_contains(c.u64.data(), c.u64.size(), found);
    case key_type::text: return f.verify_contains(text_keys(c), found);
  }
  return {};
}

/// The answers of a batch: a bool per key, grown as chunks need.
class answers {
 public:
  bool* for_chunk(std::size_t n) {
    if (n > capacity_) {
      values_.reset(new bool[n]);
      capacity_ = n;
    }
    return values_.get();
  }

 private:
  std::unique_ptr<bool[]> values_;
  std::size_t capacity_ = 0;
};

/// --verify across chunks: CPU recomputation of the backend's answers, and (for
/// inserted keys) that every one is found.
class verifier {
 public:
  template <class Filter>
  void check(const Filter& f, const key_chunk& c, const bool* found, bool must_be_found) {
    const verify_report r = verify_chunk(f, c, found);
    if (r.mismatches > 0 && total_.mismatches == 0) total_.first_mismatch = rows_ + r.first_mismatch;
    total_.mismatches += r.mismatches;
    total_.keys_checked += r.keys_checked;
    if (must_be_found) {
      checked_inserted_ = true;
      for (std::size_t i = 0; i < c.size(); ++i) false_negatives_ += !found[i];
    }
    rows_ += c.size();
  }

  /// Prints the report on stderr; true when everything agreed.
  bool report() const {
    std::fprintf(stderr, "gbf: verify: %s answers recomputed on the CPU, %s mismatches",
                 with_commas(total_.keys_checked).c_str(), with_commas(total_.mismatches).c_str());
    if (total_.mismatches > 0)
      std::fprintf(stderr, " (first at row %s)", with_commas(total_.first_mismatch).c_str());
    // False negatives are known only of keys just inserted (add, build): a query's
    // keys may be absent, so it has no such count to give.
    if (checked_inserted_) std::fprintf(stderr, ", %s false negatives", with_commas(false_negatives_).c_str());
    std::fprintf(stderr, "\n");
    return total_.ok() && false_negatives_ == 0;
  }

 private:
  bool checked_inserted_ = false;
  verify_report total_;
  std::uint64_t rows_ = 0;
  std::uint64_t false_negatives_ = 0;
};

}  // namespace

/// An allocation failed while a chunk read from `path` was processed.
[[noreturn]] void fail_chunk_memory(const std::string& path, std::uint64_t first_key, std::size_t keys) {
  throw io_error("'" + path + "': out of memory processing keys " + with_commas(first_key) + " to " +
                     with_commas(first_key + keys) + ": " + std::strerror(ENOMEM),
                 ENOMEM);
}

namespace {

/// Adds every key of `reader` to `f`; with `verify`, checks each chunk afterwards.
/// Returns false when verification failed.
template <class Filter>
bool add_keys(Filter& f, key_reader& reader, const keys_input& keys, const run_options& run,
              std::optional<std::uint64_t> total, bool verify) {
  progress bar("added", total, run.quiet);
  key_chunk chunk;
  answers found;
  verifier check;
  while (reader.next(chunk, keys.chunk_keys)) {
    try {
      add_chunk(f, chunk);
      if (verify) {
        bool* hits = found.for_chunk(chunk.size());
        contains_chunk(f, chunk, hits);
        check.check(f, chunk, hits, true);
      }
    } catch (const std::bad_alloc&) {
      fail_chunk_memory(keys.path, bar.done(), chunk.size());
    }
    bar.advance(chunk.size());
  }
  bar.finish(" on " + ran_on(f));
  return !verify || check.report();
}

/// add_keys for a scaling chain: a non-scaling chain that fills up throws
/// filter_full naming `path` and what became of it (`unchanged`).
bool add_scaling_keys(scaling_filter& f, key_reader& reader, const keys_input& keys,
                      const run_options& run, std::optional<std::uint64_t> total, bool verify,
                      const std::string& path, const char* unchanged) {
  try {
    return add_keys(f, reader, keys, run, total, verify);
  } catch (const filter_full& e) {
    throw filter_full("'" + path + "': " + e.what() + "; " + unchanged, e.not_inserted(), e.fits());
  }
}

// ---------------------------------------------------------------------------
// info
// ---------------------------------------------------------------------------

std::string format_name(const filter_file& file) {
  if (file.format == filter_format::parquet_sbbf)
    return file.parquet_header ? "parquet-sbbf (Thrift header + bitset)" : "parquet-sbbf (bare bitset)";
  return "gbf native, version " + std::to_string(file_format_version);
}

void print_info_text(const filter_file& file, const file_metadata& meta, const filter& f) {
  const filter_stats s = f.stats();
  const layout& l = f.layout();
  const std::string problem = parquet_problem(l);
  const auto row = [](const char* name, const std::string& value) {
    std::printf("%-16s %s\n", name, value.c_str());
  };
  char text[160];
  row("file:", file.path);
  row("format:", format_name(file));
  row("layout:", to_string(l));
  row("parquet:", problem.empty() ? "compatible (exportable with --format parquet-sbbf)"
                                  : "not compatible: " + problem);
  row("capacity:", meta.capacity ? with_commas(meta.capacity) + " keys" : "unknown");
  std::snprintf(text, sizeof text, "%g", meta.fpp);
  row("target fpp:", meta.fpp > 0 ? text : "unknown");
  // A filter made from bits rather than keys (a Parquet extraction, an xor, a
  // from_words) records 0 keys: with bits set, that 0 is "not counted".
  row("keys inserted:", file.format != filter_format::gbf ? "unknown"
                        : meta.keys_inserted == 0 && s.bits_set > 0
                            ? "not counted (made from bits, not keys: see estimated keys)"
                            : with_commas(meta.keys_inserted) + " (duplicates included)");
  row("size:", with_commas(l.size_bytes()) + " bytes");
  std::snprintf(text, sizeof text, "%s of %s (fill ratio %.4f)", with_commas(s.bits_set).c_str(),
                with_commas(s.num_bits).c_str(), s.fill_ratio);
  row("bits set:", text);
  row("estimated keys:", estimated_keys_text(s));
  std::snprintf(text, sizeof text, "%.3g", s.estimated_fpr);
  row("estimated fpr:", text);
  if (meta.capacity > 0 && meta.fpp > 0) {
    std::snprintf(text, sizeof text, "%.2f at capacity (a classic Bloom filter needs %.2f)",
                  bits_per_key_at(l, meta.capacity), classic_bits_per_key(meta.fpp));
    row("bits/key:", text);
  }
  if (s.over_capacity) {
    // fpp 0 is "not recorded" (an exact layout given no fpp): no target to name.
    std::string target = "target unknown";
    if (meta.fpp > 0) {
      std::snprintf(text, sizeof text, "target %g%%", 100 * meta.fpp);
      target = text;
    }
    std::printf("WARNING: over capacity: estimated distinct keys %s in a filter sized for %s; "
                "the false-positive rate is now %.3g%% (%s)\n",
                estimated_keys_text(s).c_str(), with_commas(s.capacity).c_str(), 100 * s.estimated_fpr,
                target.c_str());
  }
}

void print_info_json(const filter_file& file, const file_metadata& meta, const filter& f) {
  const filter_stats s = f.stats();
  const layout& l = f.layout();
  std::printf("{\"file\": %s, \"format\": %s, \"kind\": \"plain\", \"words_per_block\": %u, \"bits_per_key\": %u, "
              "\"seed\": %llu, \"num_blocks\": %llu, \"size_bytes\": %llu, "
              "\"parquet_problem\": %s, \"capacity\": %s, \"fpp\": %s, \"keys_inserted\": %llu, "
              "\"bits_set\": %llu, \"num_bits\": %llu, \"fill_ratio\": %s, "
              "\"estimated_keys\": %s, \"estimated_fpr\": %s, \"over_capacity\": %s}\n",
              json_string(file.path).c_str(),
              json_string(file.format == filter_format::gbf ? "gbf" : "parquet-sbbf").c_str(),
              l.words_per_block, l.bits_per_key, static_cast<unsigned long long>(l.seed),
              static_cast<unsigned long long>(l.num_blocks),
              static_cast<unsigned long long>(l.size_bytes()), json_string(parquet_problem(l)).c_str(),
              json_recorded(meta.capacity).c_str(), json_recorded(meta.fpp).c_str(),
              static_cast<unsigned long long>(meta.keys_inserted),
              static_cast<unsigned long long>(s.bits_set), static_cast<unsigned long long>(s.num_bits),
              json_number(s.fill_ratio).c_str(), json_number(s.estimated_keys).c_str(),
              json_number(s.estimated_fpr).c_str(), s.over_capacity ? "true" : "false");
}

enum class combine_op { merge, intersect, symmetric_difference };

int combine(const combine_args& args, combine_op op) {
  refuse_output_over_inputs("-o", args.output.path, {{"input A", args.a.path}, {"input B", args.b.path}});
  const output_lock lock(args.output.path, args.run.wait);
  const char* name = op == combine_op::merge ? "merge" : op == combine_op::intersect ? "intersect" : "xor";
  // Both kinds first, so that which file comes first never changes the answer. A file
  // that cannot be read is left to its loader, which names the problem.
  const auto kind_of = [](const filter_file& file) -> std::optional<file_kind> {
    if (file.format != filter_format::gbf) return file_kind::bloom;
    try {
      return read_file_kind(file.path);
    } catch (const error&) {
      return std::nullopt;
    }
  };
  const std::optional<file_kind> kind_a = kind_of(args.a);
  const std::optional<file_kind> kind_b = kind_of(args.b);
  if (kind_a && kind_b && *kind_a != *kind_b)
    throw invalid_argument("'" + args.a.path + "' holds a " + to_string(*kind_a) + " filter and '" + args.b.path +
                           "' a " + to_string(*kind_b) + " filter: " + name + " takes two filters of one kind");
  // The same file twice (a path and a link to it, say) is one filter combined with
  // itself, as in the library and Python: A | A keeps A's count of keys, where two
  // filters holding the same keys would add up.
  struct stat stat_a {}, stat_b {};
  const bool same_file = ::stat(args.a.path.c_str(), &stat_a) == 0 && ::stat(args.b.path.c_str(), &stat_b) == 0 &&
                         stat_a.st_dev == stat_b.st_dev && stat_a.st_ino == stat_b.st_ino;
  // Counting filters add counters or keep the smaller; chains and cuckoo tables
  // merge. Counting filters have no XOR, chains no intersection that keeps their
  // levels' bounds, and a cuckoo tag does not say which key it came from.
  if (kind_a == file_kind::counting) {
    if (op == combine_op::symmetric_difference)
      throw usage_error("'" + args.a.path + "' holds a counting filter: xor is for plain filters (merge adds "
                        "counting filters' counters, intersect keeps the smaller of each)");
    return run_counting_combine(args, op == combine_op::intersect, same_file);
  }
  if (kind_a == file_kind::scaling) {
    if (op != combine_op::merge)
      throw usage_error("'" + args.a.path + "' holds a scaling filter: chains can be merged, not given to " +
                        name + " (its levels would lose their capacities and FPR bounds)");
    return run_scaling_merge(args, same_file);
  }
  if (kind_a == file_kind::cuckoo) {
    if (op != combine_op::merge)
      throw usage_error("'" + args.a.path + "' holds a cuckoo filter: cuckoo filters can be merged, not given to " +
                        name);
    return run_cuckoo_merge(args, same_file);
  }
  file_metadata meta_a;
  file_metadata meta_b;
  filter a = load_filter(args.a, args.run, meta_a);
  std::optional<filter> other;
  const filter& b = same_file ? a : other.emplace(load_filter(args.b, args.run, meta_b));
  check_exportable(a.layout(), args.output);
  naming_inputs(args, [&] {
    switch (op) {
      case combine_op::merge: a.merge(b); break;
      case combine_op::intersect: a.intersect(b); break;
      case combine_op::symmetric_difference: a.symmetric_difference(b); break;
    }
  });
  save_filter(a, args.output, meta_a.fpp);
  if (!args.run.quiet)
    std::fprintf(stderr, "gbf: wrote %s (%s of '%s' and '%s', %s bits set)\n", args.output.path.c_str(),
                 op == combine_op::merge       ? "union"
                 : op == combine_op::intersect ? "intersection"
                                               : "symmetric difference (XOR)",
                 args.a.path.c_str(), args.b.path.c_str(),
                 with_commas(a.bits_set()).c_str());
  // A union may pass the capacity neither input passed; an intersection's estimate
  // overstates its keys and an XOR holds no key set, so only a merge warns.
  if (op == combine_op::merge) warn_if_over_capacity(a, args.output.path);
  return 0;
}

}  // namespace

std::optional<std::uint64_t> parse_whole_number(const std::string& text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

shape parse_layout(const std::string& text) {
  std::vector<std::string> fields(1);
  for (const char c : text) {
    if (c == '/')
      fields.emplace_back();
    else
      fields.back() += c;
  }
  const auto malformed = [&] {
    return usage_error("layout '" + text + "' is not W/K or W/K/SEED (e.g. 8/8, 16/16/0)");
  };
  if (fields.size() < 2 || fields.size() > 3) throw malformed();
  std::uint64_t values[3] = {0, 0, 0};
  static const char* const names[] = {"words per block", "bits per key", "seed"};
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const bool digits = !fields[i].empty() && fields[i].find_first_not_of("0123456789") == std::string::npos;
    if (!digits) throw malformed();
    const std::optional<std::uint64_t> value = parse_whole_number(fields[i]);
    if (!value)
      throw usage_error("layout '" + text + "': " + names[i] + " " + fields[i] +
                        " is out of range (at most 18446744073709551615)");
    values[i] = *value;
  }
  layout l;
  l.words_per_block = static_cast<std::uint32_t>(values[0]);
  l.bits_per_key = static_cast<std::uint32_t>(values[1]);
  if (values[0] != l.words_per_block || values[1] != l.bits_per_key || layout_problem(l) != nullptr)
    throw usage_error("layout '" + text + "': " +
                      (layout_problem(l) ? layout_problem(l) : "value out of range"));
  shape s;
  s.words_per_block = l.words_per_block;
  s.bits_per_key = l.bits_per_key;
  s.seed = values[2];
  return s;
}

int run_create(const create_args& args) {
  if (args.sizing.counter_bits != 0) return run_counting_create(args);
  const output_lock lock(args.output.path, args.run.wait);
  if (args.scaling.enabled) {
    const scaling_filter f = create_scaling(args.sizing, args.scaling, args.run, args.output);
    save_scaling(f, args.output);
    report_scaling(f, "created", args.output.path, args.run.quiet);
    return 0;
  }
  const layout l = size_layout(args.sizing, args.sizing.capacity);
  check_exportable(l, args.output);
  const filter f(l, make_options(args.run), args.sizing.capacity);
  save_filter(f, args.output, args.sizing.fpp);
  if (!args.run.quiet)
    std::fprintf(stderr, "gbf: created %s: %s; %.2f bits/key for %s keys at fpp %g\n",
                 args.output.path.c_str(), to_string(l).c_str(),
                 bits_per_key_at(l, args.sizing.capacity), with_commas(args.sizing.capacity).c_str(),
                 args.sizing.fpp);
  return 0;
}

int run_build(const build_args& args) {
  if (args.sizing.counter_bits != 0) return run_counting_build(args);
  if (args.sizing.capacity == 0 && args.keys.path == "-")
    throw usage_error("building from standard input needs --capacity (its keys cannot be counted first)");
  refuse_output_over_inputs("-o", args.output.path, {{"the key file", args.keys.path}});
  const output_lock lock(args.output.path, args.run.wait);
  const auto reader = key_reader::open(args.keys.path, args.keys.format);
  const std::uint64_t total = args.sizing.capacity ? reader->known_count().value_or(0) : reader->count_keys();
  const std::uint64_t capacity = args.sizing.capacity ? args.sizing.capacity : total;
  if (capacity == 0)
    throw format_error("'" + args.keys.path + "' holds no keys; pass --capacity to size an empty filter");
  layout l;
  try {
    l = size_layout(args.sizing, capacity);
  } catch (const usage_error& e) {
    if (args.sizing.capacity != 0) throw;
    // The capacity is the key count of the file, not an option the user gave.
    throw format_error("'" + args.keys.path + "' holds " + with_commas(capacity) +
                       " keys, too many to size a filter for (" + e.what() + "); pass --capacity");
  }
  if (args.scaling.enabled) {
    sizing_options initial = args.sizing;
    initial.capacity = capacity;
    scaling_filter f = create_scaling(initial, args.scaling, args.run, args.output);
    if (!add_scaling_keys(f, *reader, args.keys, args.run,
                          total ? std::optional<std::uint64_t>(total) : std::nullopt, args.verify,
                          args.output.path, "no file was written"))
      return 1;
    save_scaling(f, args.output);
    report_scaling(f, "built", args.output.path, args.run.quiet);
    return 0;
  }
  check_exportable(l, args.output);
  filter f(l, make_options(args.run), capacity);
  const bool ok = add_keys(f, *reader, args.keys, args.run,
                           total ? std::optional<std::uint64_t>(total) : std::nullopt, args.verify);
  if (!ok) return 1;
  save_filter(f, args.output, args.sizing.fpp);
  warn_if_over_capacity(f, args.output.path);
  return 0;
}

int run_add(const add_args& args) {
  if (args.unique && !is_cuckoo_file(args.target))
    throw usage_error("--unique applies to cuckoo filters only");
  if (is_counting_file(args.target)) return run_counting_add(args);
  refuse_output_over_inputs("the filter", args.target.path, {{"the key file", args.keys.path}});
  const output_lock lock(args.target.path, args.run.wait);
  if (is_cuckoo_file(args.target)) return run_cuckoo_add(args, args.unique);
  if (is_scaling_file(args.target)) {
    scaling_filter f = load_scaling(args.target, args.run);
    const auto reader = key_reader::open(args.keys.path, args.keys.format);
    // The library's counts are of the chunk it was given; the CLI saves only at the end.
    if (!add_scaling_keys(f, *reader, args.keys, args.run, reader->known_count(), args.verify,
                          args.target.path,
                          "the batch is the chunk being added (--chunk-keys); nothing of this run "
                          "was saved: the file was not changed"))
      return 1;
    save_scaling(f, args.target);
    report_scaling(f, "added to", args.target.path, args.run.quiet);
    return 0;
  }
  file_metadata meta;
  filter f = load_filter(args.target, args.run, meta);
  const auto reader = key_reader::open(args.keys.path, args.keys.format);
  if (!add_keys(f, *reader, args.keys, args.run, reader->known_count(), args.verify)) return 1;
  save_filter(f, args.target, meta.fpp);
  warn_if_over_capacity(f, args.target.path);
  return 0;
}

/// The loop of run_query over any filter kind.
template <class Filter>
int query_with(const Filter& f, const query_args& args) {
  const auto reader = key_reader::open(args.keys.path, args.keys.format);
  std::optional<result_writer> out;
  if (!args.out.empty()) out.emplace(args.out, args.out_format);

  progress bar("queried", reader->known_count(), args.run.quiet);
  key_chunk chunk;
  answers found;
  verifier check;
  std::uint64_t hits = 0;
  while (reader->next(chunk, args.keys.chunk_keys)) {
    bool* answer = nullptr;
    try {
      answer = found.for_chunk(chunk.size());
      contains_chunk(f, chunk, answer);
      if (args.verify) check.check(f, chunk, answer, false);
    } catch (const std::bad_alloc&) {
      fail_chunk_memory(args.keys.path, bar.done(), chunk.size());
    }
    if (out) out->write(answer, chunk.size());
    if (args.select) print_selected(chunk, answer, bar.done(), args.row_numbers);
    for (std::size_t i = 0, n = chunk.size(); i < n; ++i) hits += answer[i];
    bar.advance(chunk.size());
  }
  if (out) out->close();
  const std::uint64_t keys = bar.done();
  bar.finish(" on " + ran_on(f) + ": " + with_commas(hits) + " may be present");
  if (args.count)
    std::printf("%llu\n", static_cast<unsigned long long>(hits));
  else if (!args.select && args.out.empty())
    std::printf("%s of %s keys may be present\n", with_commas(hits).c_str(), with_commas(keys).c_str());
  check_stdout();
  return !args.verify || check.report() ? 0 : 1;
}

int run_query(const query_args& args) {
  std::optional<output_lock> lock;
  if (!args.out.empty()) {
    refuse_output_over_inputs("--out", args.out, {{"the filter", args.target.path}, {"the key file", args.keys.path}});
    lock.emplace(args.out, args.run.wait);
  }
  if (args.counts) {
    if (is_cuckoo_file(args.target)) return run_cuckoo_counts(args);
    if (is_counting_file(args.target)) return run_counting_counts(args);
    throw usage_error("--counts is for counting and cuckoo filters; '" + args.target.path +
                      "' holds another kind, whose answer per key is yes or no (--out)");
  }
  if (is_cuckoo_file(args.target)) return run_cuckoo_query(args);
  if (is_scaling_file(args.target)) return query_with(load_scaling(args.target, args.run), args);
  file_metadata meta;
  // A counting filter answers as its projection (a counter != 0 <=> its bit is set).
  if (is_counting_file(args.target))
    return query_with(load_counting_projection(args.target, args.run, meta), args);
  return query_with(load_filter(args.target, args.run, meta), args);
}

int run_info(const info_args& args) {
  if (is_counting_file(args.target)) return run_counting_info(args);
  if (is_cuckoo_file(args.target)) return run_cuckoo_info(args);
  if (is_scaling_file(args.target)) {
    print_scaling_info(args.target, load_scaling(args.target, args.run), args.json);
    check_stdout();
    return 0;
  }
  file_metadata meta;
  const filter f = load_filter(args.target, args.run, meta);
  if (args.json)
    print_info_json(args.target, meta, f);
  else
    print_info_text(args.target, meta, f);
  check_stdout();
  return 0;
}

int run_merge(const combine_args& args) { return combine(args, combine_op::merge); }

int run_remove(const remove_args& args) {
  if (is_counting_file(args.target)) return run_counting_remove(args);
  if (args.unchecked) throw usage_error("--unchecked applies to counting filters only");
  refuse_output_over_inputs("the filter", args.target.path, {{"the key file", args.keys.path}});
  const output_lock lock(args.target.path, args.run.wait);
  if (!is_cuckoo_file(args.target)) {
    // Says what the file is (a missing file, not a filter, ...) before saying it cannot forget.
    const file_kind kind = read_file_kind(args.target.path);
    throw invalid_argument("'" + args.target.path + "' holds a " + to_string(kind) +
                      " filter, which cannot forget keys: only counting filters (create --counting) "
                      "and cuckoo filters (create --cuckoo) remove keys");
  }
  add_args cuckoo_args;
  cuckoo_args.target = args.target;
  cuckoo_args.keys = args.keys;
  cuckoo_args.run = args.run;
  return run_cuckoo_remove(cuckoo_args, args.strict);
}
int run_intersect(const combine_args& args) { return combine(args, combine_op::intersect); }
int run_xor(const combine_args& args) { return combine(args, combine_op::symmetric_difference); }

}  // namespace gbf::cli
