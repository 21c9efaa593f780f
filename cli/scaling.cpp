// The scaling chain in the CLI: sizing, files and `gbf info` (cli/scaling.hpp).
#include "cli/scaling.hpp"

#include <cstdio>
#include <optional>
#include <string>

#include "cli/command_support.hpp"
#include "cli/commands.hpp"
#include "cli/text.hpp"
#include "gbf/io.hpp"

namespace gbf::cli {

bool is_scaling_file(const filter_file& file) {
  if (file.format != filter_format::gbf) return false;
  try {
    return read_file_kind(file.path) == file_kind::scaling;
  } catch (const error&) {
    return false;  // the plain loader names the problem
  }
}

namespace {

options options_of(const run_options& run) {
  options opts;
  opts.where = run.where;
  opts.cpu_threads = run.threads;
  return opts;
}

void require_gbf_format(const filter_file& file) {
  if (file.format != filter_format::gbf)
    throw usage_error("'" + file.path +
                      "': a scaling filter is stored in the gbf format only (Parquet's SBBF "
                      "holds one bitset, not a chain of levels)");
}

}  // namespace

scaling_filter create_scaling(const sizing_options& sizing, const scaling_options& scaling,
                              const run_options& run, const filter_file& output) {
  require_gbf_format(output);
  if (sizing.parquet_compatible)
    throw usage_error("--parquet-compatible does not apply to --scaling (a chain cannot be "
                      "exported as one Parquet SBBF)");
  scaling_policy policy;
  policy.expansion = scaling.expansion;
  policy.tightening = scaling.tightening;
  policy.non_scaling = scaling.non_scaling;
  try {
    return scaling_filter::create(sizing.capacity, sizing.fpp, policy, options_of(run), sizing.s);
  } catch (const invalid_argument& e) {
    throw usage_error(e.what());
  }
}

scaling_filter load_scaling(const filter_file& file, const run_options& run) {
  require_gbf_format(file);
  return load_scaling_filter(file.path, options_of(run));
}

void save_scaling(const scaling_filter& f, const filter_file& file) {
  require_gbf_format(file);
  save(f, file.path);
}

// Tightening 1 (Hadoop's dynamic filter): every level at the fpp, so the fpp is
// each level's target, not a bound on the chain's FPR.
namespace {
bool every_level_at_fpp(const scaling_config& c) { return c.policy.tightening == 1 && !c.policy.non_scaling; }
}  // namespace

int run_scaling_merge(const combine_args& args, bool same_file) {
  require_gbf_format(args.output);
  scaling_filter a = load_scaling(args.a, args.run);
  std::optional<scaling_filter> other;
  const scaling_filter& b = same_file ? a : other.emplace(load_scaling(args.b, args.run));
  naming_inputs(args, [&] { a.merge(b); });
  save_scaling(a, args.output);
  report_scaling(a, "wrote", args.output.path + " (union of '" + args.a.path + "' and '" + args.b.path + "')",
                 args.run.quiet);
  return 0;
}

void report_scaling(const scaling_filter& f, const std::string& what, const std::string& path,
                    bool quiet) {
  if (quiet) return;
  const scaling_stats s = f.stats();
  std::fprintf(stderr,
               "gbf: %s %s: scaling filter, %zu level%s, %s keys of %s capacity, %s bytes, "
               "expected FPR %.3g (%s %g)\n",
               what.c_str(), path.c_str(), s.num_levels, s.num_levels == 1 ? "" : "s",
               with_commas(s.keys_inserted).c_str(), with_commas(s.capacity).c_str(),
               with_commas(s.size_bytes).c_str(), s.compound_fpr,
               every_level_at_fpp(f.config()) ? "each level at" : "target",
               s.fpp);
}

void print_scaling_info(const filter_file& file, const scaling_filter& f, bool json) {
  const scaling_stats s = f.stats();
  const scaling_config& c = f.config();
  if (json) {
    std::printf("{\"file\": %s, \"kind\": \"scaling\", \"capacity\": %llu, \"size_bytes\": %llu, "
                "\"num_levels\": %zu, \"keys_inserted\": %llu, \"expansion\": %s, "
                "\"tightening\": %s, \"non_scaling\": %s, \"fpp\": %s, \"compound_fpr\": %s, "
                "\"words_per_block\": %u, \"bits_per_key\": %u, \"seed\": %llu, \"levels\": [",
                json_string(file.path).c_str(), static_cast<unsigned long long>(s.capacity),
                static_cast<unsigned long long>(s.size_bytes), s.num_levels,
                static_cast<unsigned long long>(s.keys_inserted),
                c.policy.non_scaling ? "null" : std::to_string(s.expansion).c_str(),
                json_number(c.policy.tightening).c_str(), c.policy.non_scaling ? "true" : "false",
                json_number(s.fpp).c_str(), json_number(s.compound_fpr).c_str(), c.s.words_per_block,
                c.s.bits_per_key, static_cast<unsigned long long>(c.s.seed));
    for (std::size_t i = 0; i < s.levels.size(); ++i) {
      const scaling_level_stats& level = s.levels[i];
      std::printf("%s{\"capacity\": %llu, \"keys\": %llu, \"num_blocks\": %llu, "
                  "\"size_bytes\": %llu, \"target_fpp\": %s, \"fill_ratio\": %s, \"fpr\": %s}",
                  i == 0 ? "" : ", ", static_cast<unsigned long long>(level.level.capacity),
                  static_cast<unsigned long long>(level.level.keys),
                  static_cast<unsigned long long>(level.level.l.num_blocks),
                  static_cast<unsigned long long>(level.level.l.size_bytes()),
                  json_number(level.level.fpp).c_str(), json_number(level.fill_ratio).c_str(),
                  json_number(level.fpr).c_str());
    }
    std::printf("]}\n");
    return;
  }
  const auto row = [](const char* name, const std::string& value) {
    std::printf("%-25s %s\n", name, value.c_str());  // the widest: "Number of items inserted:"
  };
  char text[160];
  row("file:", file.path);
  row("format:", "gbf container, version 2, kind scaling");
  row("layout of levels:", std::to_string(c.s.words_per_block) + "/" +
                               std::to_string(c.s.bits_per_key) + "/" + std::to_string(c.s.seed));
  // RedisBloom BF.INFO's fields, under its names.
  row("Capacity:", with_commas(s.capacity));
  row("Size:", with_commas(s.size_bytes) + " bytes");
  row("Number of filters:", std::to_string(s.num_levels));
  row("Number of items inserted:", with_commas(s.keys_inserted));
  row("Expansion rate:", c.policy.non_scaling ? "none (non-scaling)" : std::to_string(s.expansion));
  std::snprintf(text, sizeof text, "%g", c.policy.tightening);
  row("tightening ratio:", text);
  std::snprintf(text, sizeof text, "%g", s.fpp);
  row("target fpp:", text);
  if (every_level_at_fpp(c))
    std::snprintf(text, sizeof text, "%.3g (no bound: tightening 1 keeps every level at %g)",
                  s.compound_fpr, s.fpp);
  else
    std::snprintf(text, sizeof text, "%.3g (bound: the levels' targets sum to at most %g)",
                  s.compound_fpr, s.fpp);
  row("expected fpr now:", text);
  std::printf("%-6s %14s %14s %14s %11s %9s %11s\n", "level", "capacity", "keys", "bytes",
              "target fpp", "fill", "fpr now");
  for (std::size_t i = 0; i < s.levels.size(); ++i) {
    const scaling_level_stats& level = s.levels[i];
    std::printf("%-6zu %14s %14s %14s %11.3g %9.4f %11.3g\n", i,
                with_commas(level.level.capacity).c_str(), with_commas(level.level.keys).c_str(),
                with_commas(level.level.l.size_bytes()).c_str(), level.level.fpp,
                level.fill_ratio, level.fpr);
  }
}

}  // namespace gbf::cli
