// The counting filter's commands (cli/counting.hpp).
#include "cli/counting.hpp"

#include <cstdio>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "cli/command_support.hpp"
#include "cli/progress.hpp"
#include "cli/text.hpp"
#include "gbf/counting_filter.hpp"
#include "gbf/io.hpp"

namespace gbf::cli {
namespace {

/// Counting filters are saved in the gbf format only; their projection exports.
void require_native(const filter_file& file, bool is_output = false) {
  if (file.format == filter_format::gbf) return;
  if (is_output)
    throw usage_error("'" + file.path +
                      "': a counting filter is saved in the gbf format only; write it as a gbf file "
                      "(without --format parquet-sbbf), then its projection as a Parquet SBBF with "
                      "`gbf project FILE.gbf -o " + file.path + " --format parquet-sbbf`");
  throw usage_error("'" + file.path +
                    "': a counting filter is saved in the gbf format only; write its projection "
                    "as a Parquet SBBF with `gbf project " + file.path +
                    " -o OUT --format parquet-sbbf`");
}

counting_filter load_counting_file(const filter_file& file, const run_options& run,
                                   counting_file_metadata& meta) {
  require_native(file);
  try {
    return load_counting(file.path, make_options(run), &meta);
  } catch (const std::bad_alloc&) {
    throw io_error("'" + file.path + "': out of memory loading the counting filter", ENOMEM);
  }
}

std::string saturated_text(const counting_stats& s) {
  return with_commas(s.saturated_counters) + " of " + with_commas(s.num_counters);
}

void warn_if_saturated(const counting_filter& f, const std::string& path) {
  const counting_stats s = f.stats();
  if (s.saturated_counters == 0) return;
  std::fprintf(stderr,
               "gbf: warning: '%s' has %s saturated counters: they stay at %u for good, so the "
               "keys on them can no longer be removed from the projection\n",
               path.c_str(), with_commas(s.saturated_counters).c_str(),
               counter_max(s.counter_bits));
}

std::string estimated_keys_text(const counting_stats& s) {
  return gbf::cli::estimated_keys_text(s.estimated_keys, "every counter is nonzero");
}

void warn_if_over_capacity(const counting_filter& f, const std::string& path) {
  const counting_stats s = f.stats();
  if (!s.over_capacity) return;
  std::fprintf(stderr,
               "gbf: warning: '%s' is over capacity: estimated distinct keys %s in a filter "
               "sized for %s; its false-positive rate is now %.3g%%\n",
               path.c_str(), estimated_keys_text(s).c_str(), with_commas(s.capacity).c_str(),
               100 * s.estimated_fpr);
}

enum class counting_step { add, remove, remove_unchecked };

/// Runs `step` on every key of `keys`; returns the removal report (remove only).
remove_report run_keys(counting_filter& f, const keys_input& keys, const run_options& run,
                       counting_step step) {
  const auto reader = key_reader::open(keys.path, keys.format);
  // A checked remove reads keys it then refuses: its count is of keys looked up.
  progress bar(step == counting_step::add                ? "added"
               : step == counting_step::remove_unchecked ? "removed"
                                                         : "looked up",
               reader->known_count(), run.quiet);
  key_chunk chunk;
  remove_report total;
  while (reader->next(chunk, keys.chunk_keys)) {
    try {
      remove_report r;
      switch (step) {
        case counting_step::add:
          if (chunk.type == key_type::u32) f.add(chunk.u32.data(), chunk.u32.size());
          if (chunk.type == key_type::u64) f.add(chunk.u64.data(), chunk.u64.size());
          if (chunk.type == key_type::text) f.add(text_keys(chunk));
          break;
        case counting_step::remove:
          if (chunk.type == key_type::u32) r = f.remove(chunk.u32.data(), chunk.u32.size());
          if (chunk.type == key_type::u64) r = f.remove(chunk.u64.data(), chunk.u64.size());
          if (chunk.type == key_type::text) r = f.remove(text_keys(chunk));
          break;
        case counting_step::remove_unchecked:
          if (chunk.type == key_type::u32) f.remove_unchecked(chunk.u32.data(), chunk.u32.size());
          if (chunk.type == key_type::u64) f.remove_unchecked(chunk.u64.data(), chunk.u64.size());
          if (chunk.type == key_type::text) f.remove_unchecked(text_keys(chunk));
          r.removed = chunk.size();
          break;
      }
      total.removed += r.removed;
      total.refused += r.refused;
    } catch (const std::bad_alloc&) {
      fail_chunk_memory(keys.path, bar.done(), chunk.size());
    }
    bar.advance(chunk.size());
  }
  bar.finish(std::string(" on ") + to_string(f.where()));
  return total;
}

void save_counting(const counting_filter& f, const filter_file& file, double fpp) {
  require_native(file, true);
  save(f, file.path, fpp);
}

}  // namespace

bool is_counting_file(const filter_file& file) {
  if (file.format != filter_format::gbf) return false;
  try {
    return read_file_kind(file.path) == file_kind::counting;
  } catch (const error&) {
    return false;
  }
}

int run_counting_counts(const query_args& args) {
  counting_file_metadata meta;
  return print_counts(load_counting_file(args.target, args.run, meta), args);
}

filter load_counting_projection(const filter_file& file, const run_options& run,
                                file_metadata& meta) {
  counting_file_metadata m;
  const counting_filter f = load_counting_file(file, run, m);
  const counting_stats s = f.stats();
  meta = file_metadata{m.l, m.capacity, m.fpp, s.keys_added > s.keys_removed
                                                   ? s.keys_added - s.keys_removed
                                                   : 0};
  return f.projection();
}

int run_counting_create(const create_args& args) {
  require_native(args.output, true);
  const output_lock lock(args.output.path, args.run.wait);
  const layout l = size_layout(args.sizing, args.sizing.capacity);
  const counting_filter f(l, make_options(args.run), args.sizing.capacity,
                          args.sizing.counter_bits);
  save_counting(f, args.output, args.sizing.fpp);
  if (!args.run.quiet)
    std::fprintf(stderr,
                 "gbf: created %s: counting filter, %s with %u-bit counters; %.2f bytes/key for %s "
                 "keys at fpp %g (a plain filter: %.2f)\n",
                 args.output.path.c_str(), to_string(l).c_str(), args.sizing.counter_bits,
                 f.stats().bytes_per_key, with_commas(args.sizing.capacity).c_str(),
                 args.sizing.fpp,
                 static_cast<double>(l.size_bytes()) / static_cast<double>(args.sizing.capacity));
  return 0;
}

int run_counting_build(const build_args& args) {
  require_native(args.output, true);
  if (args.verify) throw usage_error("--verify is not available with --counting");
  if (args.sizing.capacity == 0 && args.keys.path == "-")
    throw usage_error("building from standard input needs --capacity (its keys cannot be counted first)");
  refuse_output_over_inputs("-o", args.output.path, {{"the key file", args.keys.path}});
  const output_lock lock(args.output.path, args.run.wait);
  std::uint64_t capacity = args.sizing.capacity;
  if (capacity == 0) capacity = key_reader::open(args.keys.path, args.keys.format)->count_keys();
  if (capacity == 0)
    throw format_error("'" + args.keys.path + "' holds no keys; pass --capacity to size an empty filter");
  counting_filter f(size_layout(args.sizing, capacity), make_options(args.run), capacity,
                    args.sizing.counter_bits);
  run_keys(f, args.keys, args.run, counting_step::add);
  save_counting(f, args.output, args.sizing.fpp);
  warn_if_over_capacity(f, args.output.path);
  warn_if_saturated(f, args.output.path);
  return 0;
}

int run_counting_add(const add_args& args) {
  if (args.verify) throw usage_error("--verify is not available for counting filters");
  refuse_output_over_inputs("the filter", args.target.path, {{"the key file", args.keys.path}});
  const output_lock lock(args.target.path, args.run.wait);
  counting_file_metadata meta;
  counting_filter f = load_counting_file(args.target, args.run, meta);
  run_keys(f, args.keys, args.run, counting_step::add);
  save_counting(f, args.target, meta.fpp);
  warn_if_over_capacity(f, args.target.path);
  warn_if_saturated(f, args.target.path);
  return 0;
}

int run_counting_remove(const remove_args& args) {
  require_native(args.target);
  refuse_output_over_inputs("the filter", args.target.path, {{"the key file", args.keys.path}});
  const output_lock lock(args.target.path, args.run.wait);
  counting_file_metadata meta;
  counting_filter f = load_counting_file(args.target, args.run, meta);
  const remove_report r = run_keys(
      f, args.keys, args.run, args.unchecked ? counting_step::remove_unchecked : counting_step::remove);
  if (args.strict && r.refused > 0)
    throw invalid_argument("'" + args.target.path + "': " + with_commas(r.refused) +
                           " keys are not in the filter (--strict); the file is unchanged");
  if (r.removed > 0) save_counting(f, args.target, meta.fpp);  // nothing removed: nothing to rewrite
  if (args.unchecked)
    std::printf("%s keys removed (unchecked)\n", with_commas(r.removed).c_str());
  else
    std::printf("%s keys removed, %s refused (not present)\n", with_commas(r.removed).c_str(),
                with_commas(r.refused).c_str());
  check_stdout();
  return 0;
}

int run_counting_info(const info_args& args) {
  counting_file_metadata meta;
  const counting_filter f = load_counting_file(args.target, args.run, meta);
  const counting_stats s = f.stats();
  const layout& l = f.layout();
  const std::string problem = parquet_problem(l);
  const double plain_bytes_per_key =
      meta.capacity ? static_cast<double>(l.size_bytes()) / static_cast<double>(meta.capacity) : 0;
  if (args.json) {
    std::printf("{\"file\": %s, \"format\": \"gbf\", \"kind\": \"counting\", "
                "\"words_per_block\": %u, \"bits_per_key\": %u, \"seed\": %llu, "
                "\"num_blocks\": %llu, \"counter_bits\": %u, \"size_bytes\": %llu, "
                "\"parquet_problem\": %s, \"capacity\": %s, \"fpp\": %s, \"keys_added\": %llu, "
                "\"keys_removed\": %llu, \"nonzero_counters\": %llu, \"saturated_counters\": %llu, "
                "\"num_counters\": %llu, \"fill_ratio\": %s, \"estimated_keys\": %s, "
                "\"estimated_fpr\": %s, \"bytes_per_key\": %s, \"plain_bytes_per_key\": %s, "
                "\"over_capacity\": %s}\n",
                json_string(args.target.path).c_str(), l.words_per_block, l.bits_per_key,
                static_cast<unsigned long long>(l.seed),
                static_cast<unsigned long long>(l.num_blocks), s.counter_bits,
                static_cast<unsigned long long>(s.size_bytes), json_string(problem).c_str(),
                json_recorded(meta.capacity).c_str(), json_recorded(meta.fpp).c_str(),
                static_cast<unsigned long long>(s.keys_added),
                static_cast<unsigned long long>(s.keys_removed),
                static_cast<unsigned long long>(s.nonzero_counters),
                static_cast<unsigned long long>(s.saturated_counters),
                static_cast<unsigned long long>(s.num_counters), json_number(s.fill_ratio).c_str(),
                json_number(s.estimated_keys).c_str(), json_number(s.estimated_fpr).c_str(),
                json_recorded(s.bytes_per_key).c_str(), json_recorded(plain_bytes_per_key).c_str(),
                s.over_capacity ? "true" : "false");
    check_stdout();
    return 0;
  }
  const auto row = [](const char* name, const std::string& value) {
    std::printf("%-19s %s\n", name, value.c_str());
  };
  char text[200];
  row("file:", args.target.path);
  row("format:", "gbf container, version 2, kind counting");
  row("layout:", to_string(l));
  std::snprintf(text, sizeof text, "%u bits (saturate at %u)", s.counter_bits,
                counter_max(s.counter_bits));
  row("counters:", text);
  row("saturated counters:", saturated_text(s));
  row("projection:", problem.empty() ? "parquet-compatible (gbf project F -o OUT --format parquet-sbbf)"
                                     : "plain gbf filter only (parquet: " + problem + ")");
  row("capacity:", meta.capacity ? with_commas(meta.capacity) + " keys" : "unknown");
  std::snprintf(text, sizeof text, "%g", meta.fpp);
  row("target fpp:", meta.fpp > 0 ? text : "unknown");
  row("keys added:", with_commas(s.keys_added) + " (duplicates included)");
  row("keys removed:", with_commas(s.keys_removed));
  row("size:", with_commas(s.size_bytes) + " bytes (" + std::to_string(s.counter_bits) +
                   "x the plain filter's " + with_commas(l.size_bytes()) + ")");
  if (meta.capacity > 0) {
    std::snprintf(text, sizeof text, "%.2f at capacity (the plain filter: %.2f)", s.bytes_per_key,
                  plain_bytes_per_key);
    row("bytes/key:", text);
  }
  std::snprintf(text, sizeof text, "%s of %s (fill ratio %.4f)",
                with_commas(s.nonzero_counters).c_str(), with_commas(s.num_counters).c_str(),
                s.fill_ratio);
  row("nonzero counters:", text);
  row("estimated keys:", estimated_keys_text(s));
  std::snprintf(text, sizeof text, "%.3g", s.estimated_fpr);
  row("estimated fpr:", text);
  if (s.over_capacity)
    std::printf("WARNING: over capacity: estimated distinct keys %s in a filter sized for %s\n",
                estimated_keys_text(s).c_str(), with_commas(s.capacity).c_str());
  check_stdout();
  return 0;
}

int run_counting_combine(const combine_args& args, bool intersect, bool same_file) {
  require_native(args.output, true);
  counting_file_metadata meta_a;
  counting_file_metadata meta_b;
  counting_filter a = load_counting_file(args.a, args.run, meta_a);
  std::optional<counting_filter> other;
  const counting_filter& b = same_file ? a : other.emplace(load_counting_file(args.b, args.run, meta_b));
  naming_inputs(args, [&] { intersect ? a.intersect(b) : a.merge(b); });
  save_counting(a, args.output, meta_a.fpp);
  const counting_stats s = a.stats();
  if (!args.run.quiet)
    std::fprintf(stderr, "gbf: wrote %s (%s of the counting filters '%s' and '%s', %s keys held)\n",
                 args.output.path.c_str(), intersect ? "counter minimum" : "counter sum", args.a.path.c_str(),
                 args.b.path.c_str(), with_commas(s.keys_added - s.keys_removed).c_str());
  warn_if_over_capacity(a, args.output.path);
  warn_if_saturated(a, args.output.path);
  return 0;
}

int run_project(const project_args& args) {
  refuse_output_over_inputs("-o", args.output.path, {{"the counting filter", args.input}});
  const output_lock lock(args.output.path, args.run.wait);
  counting_file_metadata meta;
  const counting_filter f = load_counting_file({args.input}, args.run, meta);
  check_exportable(f.layout(), args.output);
  const filter projected = f.projection();
  save_filter(projected, args.output, meta.fpp);
  if (!args.run.quiet)
    std::fprintf(stderr, "gbf: wrote %s: the projection of '%s' (%s bits set)\n",
                 args.output.path.c_str(), args.input.c_str(),
                 with_commas(projected.bits_set()).c_str());
  return 0;
}

}  // namespace gbf::cli
