// `gbf parquet` (cli/parquet.hpp): row-group pruning and filter extraction over
// gbf::parquet (gbf/parquet.hpp).
#include "cli/parquet.hpp"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/command_support.hpp"
#include "cli/commands.hpp"
#include "cli/key_reader.hpp"
#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "cli/text.hpp"
#include "gbf/io.hpp"
#include "gbf/parquet.hpp"

namespace gbf::cli {
namespace {

namespace pq = gbf::parquet;

struct parquet_args {
  std::vector<std::string> files;
  std::string column;
  keys_input keys;
  bool per_key = false;
  bool allow_missing = false;
  bool extract = false;
  long long row_group = -1;  ///< --row-group; -1 = all
  filter_file output;
  run_options run;
};

std::string type_text(const pq::column_info& c) {
  std::string text = pq::to_string(c.type);
  if (c.type == pq::physical_type::fixed_len_byte_array)
    text += "(" + std::to_string(c.type_length) + ")";
  if (c.is_unsigned) text += ", unsigned";
  return text;
}

// ---------------------------------------------------------------------------
// Keys: a chunk of the key file as the column's values
// ---------------------------------------------------------------------------

/// Decimal text ("-12", "+7", "42") as a sign and a magnitude; false when it is
/// not an integer, `overflow` when its magnitude passes 2^64 - 1.
bool parse_decimal(const char* p, std::size_t len, bool& negative, std::uint64_t& magnitude,
                   bool& overflow) {
  negative = false;
  overflow = false;
  magnitude = 0;
  std::size_t i = 0;
  if (i < len && (p[i] == '-' || p[i] == '+')) negative = p[i++] == '-';
  if (i == len) return false;
  for (; i < len; ++i) {
    if (p[i] < '0' || p[i] > '9') return false;
    const auto digit = static_cast<std::uint64_t>(p[i] - '0');
    if (magnitude > (UINT64_MAX - digit) / 10) overflow = true;
    magnitude = magnitude * 10 + digit;
  }
  return true;
}

/// Text keys of an integer column: the column's unsigned values as uint64, its
/// signed ones as int64; a number outside that range can be in no row group and
/// is passed as a null key.
struct parsed_integers {
  std::vector<std::uint64_t> values;  // uint64 bits of an int64 for signed columns
  std::vector<std::uint8_t> validity;
};

parsed_integers parse_integer_keys(const key_chunk& chunk, bool unsigned_column,
                                   const std::string& path, std::uint64_t first_line,
                                   const pq::column_info& column) {
  parsed_integers out;
  const std::size_t n = chunk.size();
  out.values.resize(n);
  out.validity.assign((n + 7) / 8, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const char* text = chunk.text_data.data() + chunk.offsets[i];
    const auto len = static_cast<std::size_t>(chunk.offsets[i + 1] - chunk.offsets[i]);
    bool negative = false, overflow = false;
    std::uint64_t magnitude = 0;
    if (!parse_decimal(text, len, negative, magnitude, overflow))
      throw invalid_argument("'" + path + "': line " + std::to_string(first_line + i) + ": '" +
                             printable(std::string_view(text, len)) + "' is not a decimal integer (column '" +
                             column.path + "' is " + type_text(column) + ")");
    bool representable = !overflow;
    if (unsigned_column) {
      representable = representable && (!negative || magnitude == 0);
      out.values[i] = negative ? 0 : magnitude;
    } else {
      constexpr std::uint64_t int64_max = 0x7FFFFFFFFFFFFFFFull;
      representable = representable && (negative ? magnitude <= int64_max + 1 : magnitude <= int64_max);
      out.values[i] = negative ? ~magnitude + 1 : magnitude;  // two's complement
    }
    if (representable) out.validity[i >> 3] |= static_cast<std::uint8_t>(1u << (i & 7));
  }
  return out;
}

/// A raw file's keys of the column's width are the column's values with those
/// bytes (every one representable: -5 written as a u64 finds INT64 -5, as the
/// filter itself would): they take the column's sign, for the probe and for
/// --per-key's printing alike. Of another width they stay unsigned (.npy and
/// text give the sign).
void take_the_columns_sign(const pq::column_info& column, key_chunk& chunk) {
  if (!chunk.sign_unknown) return;
  const bool same_width = (chunk.type == key_type::u32 && column.type == pq::physical_type::int32) ||
                          (chunk.type == key_type::u64 && column.type == pq::physical_type::int64);
  if (same_width) chunk.is_signed = !column.is_unsigned;
}

pq::prune_result prune_chunk(const pq::pruner& index, const key_chunk& chunk,
                             const std::string& path, std::uint64_t first_line, bool per_key) {
  const pq::column_info& column = index.column();
  const bool integer_column =
      column.type == pq::physical_type::int32 || column.type == pq::physical_type::int64;
  if (!integer_column && chunk.type != key_type::text)
    throw invalid_argument("'" + path + "' holds " + (chunk.type == key_type::u32 ? "u32" : "u64") +
                           " integer keys, and column '" + column.path + "' is " + type_text(column) +
                           ": give its values as text keys, one per line");
  switch (chunk.type) {
    case key_type::u32:
      return chunk.is_signed
                 ? index.prune(reinterpret_cast<const std::int32_t*>(chunk.u32.data()), chunk.size(), per_key)
                 : index.prune(chunk.u32.data(), chunk.size(), per_key);
    case key_type::u64:
      return chunk.is_signed
                 ? index.prune(reinterpret_cast<const std::int64_t*>(chunk.u64.data()), chunk.size(), per_key)
                 : index.prune(chunk.u64.data(), chunk.size(), per_key);
    case key_type::text:
      if (integer_column) {
        const parsed_integers keys =
            parse_integer_keys(chunk, column.is_unsigned, path, first_line, column);
        return column.is_unsigned
                   ? index.prune(keys.values.data(), keys.values.size(), keys.validity.data(), per_key)
                   : index.prune(reinterpret_cast<const std::int64_t*>(keys.values.data()),
                                 keys.values.size(), keys.validity.data(), per_key);
      } else {
        string_keys<std::int64_t> keys;
        keys.data = chunk.text_data.data();
        keys.data_bytes = chunk.text_data.size();
        keys.offsets = chunk.offsets.data();
        keys.count = chunk.size();
        return index.prune(keys, per_key);
      }
  }
  return {};
}

// ---------------------------------------------------------------------------
// gbf parquet FILE... --column C --keys KEYS
// ---------------------------------------------------------------------------

pq::read_options read_options_of(const parquet_args& args) {
  pq::read_options opts;
  opts.allow_missing = args.allow_missing;
  opts.filters.where = backend::cpu;
  opts.filters.cpu_threads = 1;
  return opts;
}

int run_prune(const parquet_args& args) {
  std::vector<pq::column_filter_set> sets;
  for (const std::string& file : args.files)
    sets.push_back(pq::column_filters(file, args.column, read_options_of(args)));
  options where;
  where.where = args.run.where;
  where.cpu_threads = args.run.threads;
  const pq::pruner index(std::move(sets), where);
  const std::size_t groups = index.num_row_groups();

  const auto reader = key_reader::open(args.keys.path, args.keys.format);
  progress bar("pruned for", reader->known_count(), args.run.quiet);
  std::vector<std::uint8_t> may_hold(groups, 0);
  key_chunk chunk;
  // The header comes with the first answers, so a key file refused before any
  // (bad keys, the wrong kind) leaves stdout empty.
  bool header_written = false;
  while (reader->next(chunk, args.keys.chunk_keys)) {
    take_the_columns_sign(index.column(), chunk);
    const pq::prune_result r = prune_chunk(index, chunk, args.keys.path, bar.done() + 1, args.per_key);
    for (std::size_t g = 0; g < groups; ++g) may_hold[g] |= r.may_hold[g];
    if (args.per_key) {
      if (!std::exchange(header_written, true)) std::printf("key\trow_groups\n");
      std::string line;
      for (std::size_t i = 0; i < chunk.size(); ++i) {
        line = chunk.key_string(i);
        line += '\t';
        for (std::uint64_t at = r.key_offsets[i]; at < r.key_offsets[i + 1]; ++at) {
          const pq::row_group_ref& g = index.row_group(r.row_groups[at]);
          if (at != r.key_offsets[i]) line += ',';
          line += index.files()[g.file] + ":" + std::to_string(g.row_group);
        }
        line += '\n';
        std::fwrite(line.data(), 1, line.size(), stdout);
      }
    }
    bar.advance(chunk.size());
  }
  if (args.per_key && !header_written) std::printf("key\trow_groups\n");  // no keys: the header alone

  if (!args.per_key) {
    std::printf("file\trow_group\trows\tcolumn_bytes\tmay_hold\n");
    for (std::size_t g = 0; g < groups; ++g) {
      const pq::row_group_ref& ref = index.row_group(g);
      std::printf("%s\t%zu\t%llu\t%llu\t%s\n", index.files()[ref.file].c_str(), ref.row_group,
                  static_cast<unsigned long long>(ref.num_rows),
                  static_cast<unsigned long long>(ref.column_bytes), may_hold[g] ? "yes" : "no");
    }
  }

  std::uint64_t kept = 0, rows = 0, skipped_rows = 0, bytes = 0, skipped_bytes = 0, unfiltered = 0;
  for (std::size_t g = 0; g < groups; ++g) {
    const pq::row_group_ref& ref = index.row_group(g);
    rows += ref.num_rows;
    bytes += ref.column_bytes;
    unfiltered += ref.has_filter ? 0 : 1;
    if (may_hold[g]) {
      ++kept;
    } else {
      skipped_rows += ref.num_rows;
      skipped_bytes += ref.column_bytes;
    }
  }
  const std::string files = std::to_string(index.files().size()) +
                            (index.files().size() == 1 ? " file" : " files");
  std::string detail = " against " + with_commas(groups) + " row groups of " + files +
                       " (column '" + index.column().path + "', " + type_text(index.column()) +
                       ", " + to_string(index.where()) + "): " + with_commas(kept) +
                       " may hold some key; " + with_commas(groups - kept) + " can be skipped (" +
                       with_commas(skipped_rows) + " of " + with_commas(rows) + " rows, " +
                       bytes_text(skipped_bytes) + " of " + bytes_text(bytes) +
                       " of the column's data)";
  if (unfiltered > 0)
    detail += "; " + with_commas(unfiltered) + " row groups have no Bloom filter and are kept";
  bar.finish(detail);
  check_stdout();
  return 0;
}

// ---------------------------------------------------------------------------
// gbf parquet FILE --column C --extract
// ---------------------------------------------------------------------------

int run_extract(const parquet_args& args) {
  if (args.files.size() != 1)
    throw usage_error("--extract reads one FILE (got " + std::to_string(args.files.size()) + ")");
  if (args.output.path.empty()) throw usage_error("--extract needs -o/--output");
  refuse_output_over_inputs("-o", args.output.path, {{"the Parquet file", args.files[0]}});
  const output_lock lock(args.output.path, args.run.wait);
  pq::read_options opts = read_options_of(args);
  opts.allow_missing = true;  // a missing filter matters only if it is asked for
  pq::column_filter_set set = pq::column_filters(args.files[0], args.column, opts);
  const std::string what = "column '" + set.column.path + "' of '" + set.file + "'";

  if (set.row_groups.empty()) throw invalid_argument(what + ": the file has no row groups");

  std::optional<filter> out;
  std::string description;
  if (args.row_group >= 0) {
    const auto g = static_cast<std::size_t>(args.row_group);
    if (g >= set.row_groups.size())
      throw usage_error("--row-group " + std::to_string(g) + ": '" + set.file + "' has " +
                        std::to_string(set.row_groups.size()) + " row groups (0 to " +
                        std::to_string(set.row_groups.size() - 1) + ")");
    if (!set.row_groups[g].bloom)
      throw invalid_argument(what + ": row group " + std::to_string(g) + " has no Bloom filter");
    out = std::move(set.row_groups[g].bloom);
    description = "the filter of row group " + std::to_string(g);
  } else {
    std::string missing;
    bool sizes_agree = true;
    const pq::row_group_filter* first = nullptr;
    for (const pq::row_group_filter& g : set.row_groups) {
      if (!g.bloom) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(g.row_group);
      } else if (first == nullptr) {
        first = &g;
      } else if (g.bloom->layout() != first->bloom->layout()) {
        sizes_agree = false;
      }
    }
    if (!missing.empty())
      throw invalid_argument(what + ": row groups " + missing +
                             " have no Bloom filter, so there is no union of all; pass "
                             "--row-group N for one that has");
    if (!sizes_agree) {
      std::string sizes;
      for (const pq::row_group_filter& g : set.row_groups)
        sizes += (sizes.empty() ? "" : ", ") + std::to_string(g.row_group) + ": " +
                 bytes_text(g.bloom->layout().size_bytes());
      throw invalid_argument(what + ": the row groups' filters differ in size (" + sizes +
                             "), so they have no union; pass --row-group N to extract one");
    }
    out = std::move(set.row_groups.front().bloom);
    for (std::size_t g = 1; g < set.row_groups.size(); ++g) out->merge(*set.row_groups[g].bloom);
    description = set.row_groups.size() == 1
                      ? "the filter of its only row group"
                      : "the union of the filters of its " + std::to_string(set.row_groups.size()) +
                            " row groups";
  }
  const bool as_parquet = args.output.format == filter_format::parquet_sbbf;
  if (as_parquet) {
    save_parquet_sbbf(*out, args.output.path, args.output.parquet_header);
  } else {
    save(*out, args.output.path);
  }
  if (!args.run.quiet)
    std::fprintf(stderr, "gbf: wrote %s of %s (%s) to '%s' as %s\n", description.c_str(),
                 what.c_str(), to_string(out->layout()).c_str(), args.output.path.c_str(),
                 as_parquet ? (args.output.parquet_header ? "a Parquet SBBF with its Thrift header"
                                                          : "a bare Parquet SBBF bitset")
                            : "a gbf filter");
  return 0;
}

}  // namespace

void add_parquet_command(CLI::App& app, std::function<int()>& command) {
  auto args = std::make_shared<parquet_args>();
  CLI::App* cmd = app.add_subcommand(
      "parquet",
      "Bloom filters of a column of Parquet files: which row groups may hold some keys "
      "(--keys), or extract a filter (--extract)");
  cmd->add_option("FILE", args->files, "Parquet files")->required();
  cmd->add_option("--column", args->column, "Column name or dotted path (e.g. user.id)")->required();
  CLI::Option* keys = cmd->add_option(
      "--keys", args->keys.path,
      "Key file ('-' = standard input): text (integers for INT32/INT64 columns, raw bytes "
      "otherwise), .npy, .u32/.u64");
  cmd->add_option("--keys-format", args->keys.format,
                  "auto (.npy by magic, .u32/.u64 raw, otherwise text), u32, u64, text, int, npy")
      ->transform(one_of(key_format_names));
  cmd->add_option("--chunk-keys", args->keys.chunk_keys, "Keys read and pruned per batch")
      ->check(whole_number(1, std::uint64_t{1} << 30));
  CLI::Option* per_key = cmd->add_flag(
      "--per-key", args->per_key,
      "Print each key's row groups (key TAB file:row_group,...) instead of the row-group table");
  cmd->add_flag("--allow-missing", args->allow_missing,
                "Keep row groups without a Bloom filter (never skipped) instead of failing");
  CLI::Option* extract = cmd->add_flag(
      "--extract", args->extract,
      "Write a filter: --row-group N's, or the union of all row groups' when their sizes agree");
  CLI::Option* row_group =
      cmd->add_option("--row-group", args->row_group, "With --extract: the row group (0-based)")
          ->check(CLI::Range(0LL, 1LL << 40));
  CLI::Option* output =
      cmd->add_option("-o,--output", args->output.path, "With --extract: filter file to write (atomically)")
          ->check(nonempty_path());
  CLI::Option* format =
      cmd->add_option("--format", args->output.format,
                      "With --extract: gbf (native, default) or parquet-sbbf")
          ->transform(one_of(filter_format_names));
  // Runs after --format's callback (options run in the order they were added).
  CLI::Option* no_header = cmd->add_flag_callback(
      "--no-header",
      [args] {
        if (args->output.format != filter_format::parquet_sbbf)
          throw CLI::ValidationError("--no-header", "applies to parquet-sbbf files only (--format parquet-sbbf)");
        args->output.parquet_header = false;
      },
      "With --format parquet-sbbf: the bare bitset, without the Thrift BloomFilterHeader");
  cmd->add_option("--backend", args->run.where, "Where pruning runs: auto (GPU if present), gpu or cpu")
      ->transform(one_of(backend_names));
  add_threads_option(cmd, args->run.threads, "CPU threads (0 = all hardware threads; at most 1024)");
  add_wait_flag(cmd, args->run);
  cmd->add_flag("-q,--quiet", args->run.quiet, "No summary on stderr");
  extract->excludes(keys)->excludes(per_key);
  row_group->needs(extract);
  output->needs(extract);
  format->needs(extract);
  no_header->needs(extract);
  cmd->final_callback([&command, args, keys, extract] {
    if (extract->count() == 0 && keys->count() == 0)
      throw CLI::RequiredError("--keys or --extract");
    command = [args] { return args->extract ? run_extract(*args) : run_prune(*args); };
  });
}

}  // namespace gbf::cli
