// The cuckoo filter's subcommands (cli/cuckoo.hpp).
#include "cli/cuckoo.hpp"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command_support.hpp"
#include "cli/progress.hpp"
#include "cli/text.hpp"
#include "gbf/cuckoo_filter.hpp"
#include "gbf/io.hpp"

namespace gbf::cli {
namespace {

void require_gbf_format(const filter_file& file) {
  if (file.format != filter_format::gbf)
    throw usage_error("'" + file.path + "' holds a cuckoo filter: only --format gbf applies");
}

cuckoo_filter load_cuckoo_file(const filter_file& file, const run_options& run,
                               cuckoo_file_metadata& meta) {
  require_gbf_format(file);
  try {
    return load_cuckoo(file.path, make_options(run), &meta);
  } catch (const std::bad_alloc&) {
    throw io_error("'" + file.path + "': out of memory loading the filter: " + std::strerror(ENOMEM),
                   ENOMEM);
  }
}

std::string percent(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f%%", 100 * x);
  return text;
}

std::string number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", x);
  return text;
}



void warn_if_over_load(const cuckoo_filter& f, const std::string& path) {
  const cuckoo_stats s = f.stats();
  if (!s.over_capacity) return;
  if (s.load_factor > s.max_load) {
    std::fprintf(stderr,
                 "gbf: warning: '%s' is %s full, past the %s up to which inserts never fail; "
                 "its false-positive rate is now %.3g%%\n",
                 path.c_str(), percent(s.load_factor).c_str(), percent(s.max_load).c_str(),
                 100 * s.estimated_fpr);
  } else {
    std::fprintf(stderr,
                 "gbf: warning: '%s' holds %s keys, past its capacity of %s; "
                 "its false-positive rate is now %.3g%%\n",
                 path.c_str(), with_commas(s.occupied_slots).c_str(), with_commas(s.capacity).c_str(),
                 100 * s.estimated_fpr);
  }
}

}  // namespace

CLI::Option* add_cuckoo_create_options(CLI::App* create_cmd, cuckoo_create_options& opts) {
  CLI::Option* cuckoo = create_cmd->add_flag(
      "--cuckoo", opts.enabled,
      "A cuckoo filter (deletes, counts; RedisBloom's CF) instead of a Bloom filter");
  create_cmd->add_option("--tag-bits", opts.tag_bits,
                         "With --cuckoo: tag width 8, 16 or 32 (default: the smallest table)")
      ->check(CLI::IsMember({0u, 8u, 16u, 32u}))
      ->needs(cuckoo);
  create_cmd->add_option("--max-kicks", opts.max_kicks,
                         "With --cuckoo: most tags one insert may move (1 to 32, default 20)")
      ->check(CLI::Range(1u, cuckoo_max_kicks_limit))
      ->needs(cuckoo);
  return cuckoo;
}

bool is_cuckoo_file(const filter_file& file) {
  if (file.format != filter_format::gbf) return false;
  try {
    return read_file_kind(file.path) == file_kind::cuckoo;
  } catch (const error&) {
    return false;
  }
}

int run_cuckoo_create(const create_args& args, const cuckoo_create_options& opts) {
  if (args.output.format != filter_format::gbf)
    throw usage_error("--cuckoo writes gbf files only (--format gbf)");
  if (args.sizing.parquet_compatible)
    throw usage_error("--parquet-compatible sizes Bloom filters; it does not apply with --cuckoo");
  if (args.sizing.layout_given)
    throw usage_error("--layout shapes Bloom filters; with --cuckoo use --tag-bits and --max-kicks");
  const output_lock lock(args.output.path, args.run.wait);
  cuckoo_shape s;
  s.tag_bits = opts.tag_bits;
  s.max_kicks = opts.max_kicks;
  cuckoo_layout l;
  try {
    l = cuckoo_size_for(args.sizing.capacity, args.sizing.fpp, s);
  } catch (const invalid_argument& e) {
    throw usage_error(e.what());
  }
  const cuckoo_filter f(l, make_options(args.run), args.sizing.capacity, opts.max_kicks);
  save(f, args.output.path, args.sizing.fpp);
  if (!args.run.quiet)
    std::fprintf(stderr, "gbf: created %s: cuckoo filter, %s; %.2f bits/key for %s keys at fpp %g\n",
                 args.output.path.c_str(), to_string(l).c_str(),
                 cuckoo_bits_per_key(l, args.sizing.capacity),
                 with_commas(args.sizing.capacity).c_str(), args.sizing.fpp);
  return 0;
}

int run_cuckoo_add(const add_args& args, bool unique) {
  cuckoo_file_metadata meta;
  cuckoo_filter f = load_cuckoo_file(args.target, args.run, meta);
  const auto reader = key_reader::open(args.keys.path, args.keys.format);
  progress bar("added", reader->known_count(), args.run.quiet);
  key_chunk chunk;
  std::unique_ptr<bool[]> found;
  std::size_t found_room = 0;
  cuckoo_add_report total;
  std::uint64_t false_negatives = 0;
  std::uint64_t mismatches = 0;
  cuckoo_add_options how;
  how.unique = unique;
  while (reader->next(chunk, args.keys.chunk_keys)) {
    const cuckoo_add_report r = on_keys(chunk, [&](const auto&... keys) {
      return f.add(keys..., nullptr, how);
    });
    total.inserted += r.inserted;
    total.present += r.present;
    total.failed += r.failed;
    if (args.verify) {
      bool* hits = room_for(found, found_room, chunk.size());
      on_keys(chunk, [&](const auto&... keys) { f.contains(keys..., hits); });
      mismatches += on_keys(chunk, [&](const auto&... keys) { return f.verify_contains(keys..., hits).mismatches; });
      if (r.failed == 0)
        for (std::size_t i = 0; i < chunk.size(); ++i) false_negatives += !hits[i];
    }
    bar.advance(chunk.size());
  }
  bar.finish(std::string(" on ") + to_string(f.where()) + ": " + with_commas(total.inserted) + " inserted" +
             (unique ? ", " + with_commas(total.present) + " already present" : ""));
  if (total.failed > 0) {
    const cuckoo_stats stats = f.stats();
    const std::string failed = with_commas(total.failed) + " of " + with_commas(bar.done()) +
                               " keys could not be inserted (load " + percent(stats.load_factor);
    // Below the sizing load a table rarely runs out of moves; what fails there
    // is a key added more times than its two buckets have slots, and any key
    // whose buckets those copies fill (the failed key need not be the repeated one).
    if (!stats.over_capacity && !unique)
      throw filter_full("'" + args.target.path + "': " + failed + ", below the table's capacity): " +
                            "most likely a key was added more than " +
                            std::to_string(2 * f.layout().slots_per_bucket()) +
                            " times (all its two buckets hold) and its copies filled the buckets the "
                            "failed keys needed (--unique adds each key once); the file is unchanged",
                        total.failed, 0);
    throw filter_full("'" + args.target.path + "': the cuckoo filter is full: " + failed +
                          "); the file is unchanged: create a larger filter (--capacity)",
                      total.failed, 0);
  }
  if (args.verify) {
    std::fprintf(stderr, "gbf: verify: %s answers recomputed on the CPU, %s mismatches, %s false negatives\n",
                 with_commas(bar.done()).c_str(), with_commas(mismatches).c_str(),
                 with_commas(false_negatives).c_str());
    if (mismatches != 0 || false_negatives != 0) return 1;
  }
  save(f, args.target.path, meta.fpp);
  warn_if_over_load(f, args.target.path);
  return 0;
}

int run_cuckoo_remove(const add_args& args, bool strict) {
  cuckoo_file_metadata meta;
  cuckoo_filter f = load_cuckoo_file(args.target, args.run, meta);
  const auto reader = key_reader::open(args.keys.path, args.keys.format);
  progress bar("looked up", reader->known_count(), args.run.quiet);  // "N removed, M refused" follows
  key_chunk chunk;
  std::unique_ptr<bool[]> removed;
  std::size_t removed_room = 0;
  std::uint64_t done = 0;
  std::optional<std::uint64_t> first_missing;
  while (reader->next(chunk, args.keys.chunk_keys)) {
    bool* ok = room_for(removed, removed_room, chunk.size());
    done += on_keys(chunk, [&](const auto&... keys) { return f.remove(keys..., ok); });
    if (!first_missing)
      for (std::size_t i = 0; i < chunk.size(); ++i)
        if (!ok[i]) {
          first_missing = bar.done() + i;
          break;
        }
    bar.advance(chunk.size());
  }
  const std::uint64_t missing = bar.done() - done;
  bar.finish(std::string(" on ") + to_string(f.where()) + ": " + with_commas(done) + " removed, " +
             with_commas(missing) + " refused (not present)");
  if (strict && missing > 0)
    throw invalid_argument("'" + args.target.path + "': --strict: " + with_commas(missing) +
                           " of " + with_commas(bar.done()) + " keys were not in the filter " +
                           "(the first at row " + with_commas(*first_missing) +
                           "); the file is unchanged");
  if (done > 0) save(f, args.target.path, meta.fpp);  // nothing removed: nothing to rewrite
  std::printf("%s keys removed, %s refused (not present)\n", with_commas(done).c_str(),
              with_commas(missing).c_str());
  check_stdout();
  return 0;
}

int run_cuckoo_merge(const combine_args& args, bool same_file) {
  if (args.output.format != filter_format::gbf)
    throw usage_error("'" + args.output.path + "': a merge of cuckoo filters is written in the gbf format only "
                      "(--format gbf)");
  cuckoo_file_metadata meta_a;
  cuckoo_file_metadata meta_b;
  cuckoo_filter a = load_cuckoo_file(args.a, args.run, meta_a);
  std::optional<cuckoo_filter> other;
  const cuckoo_filter& b = same_file ? a : other.emplace(load_cuckoo_file(args.b, args.run, meta_b));
  naming_inputs(args, [&] { a.merge(b); });
  save(a, args.output.path, meta_a.fpp);
  const cuckoo_stats s = a.stats();
  if (!args.run.quiet)
    std::fprintf(stderr, "gbf: wrote %s (union of the cuckoo filters '%s' and '%s': %s tags, load %s)\n",
                 args.output.path.c_str(), args.a.path.c_str(), args.b.path.c_str(),
                 with_commas(s.occupied_slots).c_str(), percent(s.load_factor).c_str());
  warn_if_over_load(a, args.output.path);
  return 0;
}

int run_cuckoo_query(const query_args& args) {
  cuckoo_file_metadata meta;
  const cuckoo_filter f = load_cuckoo_file(args.target, args.run, meta);
  const auto reader = key_reader::open(args.keys.path, args.keys.format);
  std::optional<result_writer> out;
  if (!args.out.empty()) out.emplace(args.out, args.out_format);
  progress bar("queried", reader->known_count(), args.run.quiet);
  key_chunk chunk;
  std::unique_ptr<bool[]> found;
  std::size_t found_room = 0;
  std::uint64_t hits = 0;
  std::uint64_t mismatches = 0;
  while (reader->next(chunk, args.keys.chunk_keys)) {
    bool* answer = room_for(found, found_room, chunk.size());
    on_keys(chunk, [&](const auto&... keys) { f.contains(keys..., answer); });
    if (args.verify)
      mismatches += on_keys(chunk, [&](const auto&... keys) { return f.verify_contains(keys..., answer).mismatches; });
    if (out) out->write(answer, chunk.size());
    if (args.select) print_selected(chunk, answer, bar.done(), args.row_numbers);
    for (std::size_t i = 0, n = chunk.size(); i < n; ++i) hits += answer[i];
    bar.advance(chunk.size());
  }
  if (out) out->close();
  bar.finish(std::string(" on ") + to_string(f.where()) + ": " + with_commas(hits) + " may be present");
  if (args.count)
    std::printf("%llu\n", static_cast<unsigned long long>(hits));
  else if (!args.select && args.out.empty())
    std::printf("%s of %s keys may be present\n", with_commas(hits).c_str(),
                with_commas(bar.done()).c_str());
  check_stdout();
  if (args.verify) {
    std::fprintf(stderr, "gbf: verify: %s answers recomputed on the CPU, %s mismatches\n",
                 with_commas(bar.done()).c_str(), with_commas(mismatches).c_str());
    if (mismatches != 0) return 1;
  }
  return 0;
}

int run_cuckoo_counts(const query_args& args) {
  cuckoo_file_metadata meta;
  return print_counts(load_cuckoo_file(args.target, args.run, meta), args);
}

int run_cuckoo_info(const info_args& args) {
  cuckoo_file_metadata meta;
  const cuckoo_filter f = load_cuckoo_file(args.target, args.run, meta);
  const cuckoo_stats s = f.stats();
  const cuckoo_layout& l = f.layout();
  if (args.json) {
    std::printf("{\"file\": %s, \"kind\": \"cuckoo\", \"tag_bits\": %u, \"slots_per_bucket\": %u, "
                "\"num_buckets\": %llu, \"seed\": %llu, \"size_bytes\": %llu, \"max_kicks\": %u, "
                "\"capacity\": %s, \"fpp\": %s, \"occupied_slots\": %llu, \"num_slots\": %llu, "
                "\"load_factor\": %s, \"max_load\": %s, \"estimated_fpr\": %s, "
                "\"keys_added\": %llu, \"keys_removed\": %llu, \"evictions\": %llu, "
                "\"failed_inserts\": %llu, \"over_capacity\": %s}\n",
                json_string(args.target.path).c_str(), l.tag_bits, l.slots_per_bucket(),
                static_cast<unsigned long long>(l.num_buckets),
                static_cast<unsigned long long>(l.seed),
                static_cast<unsigned long long>(l.size_bytes()), f.max_kicks(),
                json_recorded(meta.capacity).c_str(), json_recorded(meta.fpp).c_str(),
                static_cast<unsigned long long>(s.occupied_slots),
                static_cast<unsigned long long>(s.num_slots), json_number(s.load_factor).c_str(),
                json_number(s.max_load).c_str(), json_number(s.estimated_fpr).c_str(),
                static_cast<unsigned long long>(s.keys_added),
                static_cast<unsigned long long>(s.keys_removed),
                static_cast<unsigned long long>(s.evictions),
                static_cast<unsigned long long>(s.failed_inserts),
                s.over_capacity ? "true" : "false");
  } else {
    const auto row = [](const char* name, const std::string& value) {
      std::printf("%-16s %s\n", name, value.c_str());
    };
    row("file:", args.target.path);
    row("format:", "gbf container, kind cuckoo");
    row("layout:", to_string(l));
    row("max kicks:", std::to_string(f.max_kicks()));
    row("capacity:", meta.capacity ? with_commas(meta.capacity) + " keys" : "unknown");
    row("target fpp:", meta.fpp > 0 ? number(meta.fpp) : "unknown");
    row("size:", with_commas(l.size_bytes()) + " bytes");
    row("tags:", with_commas(s.occupied_slots) + " of " + with_commas(s.num_slots) + " slots (load " +
                     percent(s.load_factor) + ", inserts never fail up to " + percent(s.max_load) + ")");
    row("estimated fpr:", number(s.estimated_fpr));
    row("keys added:", with_commas(s.keys_added));
    row("keys removed:", with_commas(s.keys_removed));
    row("evictions:", with_commas(s.evictions));
    row("failed inserts:", with_commas(s.failed_inserts));
    if (meta.capacity > 0) {
      char text[64];
      std::snprintf(text, sizeof text, "%.2f at capacity", cuckoo_bits_per_key(l, meta.capacity));
      row("bits/key:", text);
    }
    if (s.load_factor > s.max_load)
      std::printf("WARNING: over capacity: load %s is past %s; inserts may fail\n",
                  percent(s.load_factor).c_str(), percent(s.max_load).c_str());
    else if (s.over_capacity)
      std::printf("WARNING: over capacity: %s keys held, capacity %s; the false-positive rate "
                  "is past what it was sized for\n",
                  with_commas(s.occupied_slots).c_str(), with_commas(s.capacity).c_str());
  }
  check_stdout();
  return 0;
}

}  // namespace gbf::cli
