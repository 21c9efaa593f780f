// The gbf command: CLI11 wiring only; the work is in demo.cpp, bench.cpp and commands.cpp.
//
// Exit codes: 0 success, 1 runtime failure, 2 usage error. Errors go to stderr
// prefixed "gbf: ". SIGINT, SIGTERM, SIGHUP and SIGPIPE first remove the
// process's named temporary and lock files, then end it as the signal would
// (the shell reports 128 + the signal number: 130 for SIGINT, 143 for SIGTERM),
// except once the command's output file is in place (see on_fatal_signal).
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <limits>
#include <functional>
#include <new>
#include <string>
#include <tuple>
#include <vector>

#include "cli/bench.hpp"
#include "cli/commands.hpp"
#include "cli/counting.hpp"
#include "cli/cuckoo.hpp"
#include "cli/demo.hpp"
#include "cli/join.hpp"
#include "cli/options.hpp"
#include "cli/parquet.hpp"
#include "cli/progress.hpp"
#include "cli/text.hpp"
#include "gbf/error.hpp"
#include "gbf/files.hpp"
#include "gbf/version.hpp"

namespace {

using namespace gbf::cli;

void add_run_options(CLI::App* cmd, run_options& run) {
  cmd->add_option("--backend", run.where, "Where the filter runs: auto (GPU if present), gpu or cpu")
      ->transform(one_of(backend_names));
  add_threads_option(cmd, run.threads, "CPU threads (0 = all hardware threads; at most 1024)");
  cmd->add_flag("-q,--quiet", run.quiet, "No summary line on stderr");
}

/// --format and --no-header for the filter file(s) `files` (all share them).
void add_format_options(CLI::App* cmd, std::vector<filter_file*> files, const char* option,
                        const std::string& help) {
  cmd->add_option_function<filter_format>(
         option, [files](const filter_format& f) { for (filter_file* file : files) file->format = f; },
         help + ": gbf (native, default) or parquet-sbbf (Parquet's Bloom filter)")
      ->transform(one_of(filter_format_names));
}

void add_no_header_flag(CLI::App* cmd, std::vector<filter_file*> files) {
  // Option callbacks run in the order the options were added, after the format
  // options' (added first): the files' formats are known here.
  cmd->add_flag_callback(
      "--no-header",
      [files] {
        bool any_sbbf = false;
        for (filter_file* file : files) {
          file->parquet_header = false;
          any_sbbf |= file->format == filter_format::parquet_sbbf;
        }
        if (!any_sbbf)
          throw CLI::ValidationError("--no-header", "applies to parquet-sbbf files only (--format parquet-sbbf)");
      },
      "parquet-sbbf files are the bare bitset, without the Thrift BloomFilterHeader");
}

void add_keys_options(CLI::App* cmd, keys_input& keys) {
  cmd->add_option("KEYS", keys.path, "Key file ('-' = standard input)")->required();
  cmd->add_option("--keys-format", keys.format,
                  "auto (.npy by magic, .u32/.u64 raw, otherwise text; .bin/.raw/.dat need an "
                  "explicit width), u32, u64 (raw little-endian), text (one key per line: its bytes), "
                  "int (one decimal integer per line: an 8-byte key, as a Python int, NumPy int64 or "
                  "Parquet INT64 gives), npy")
      ->transform(one_of(key_format_names));
  cmd->add_option("--chunk-keys", keys.chunk_keys, "Keys read and processed per batch")
      ->check(whole_number(1, std::uint64_t{1} << 30));
}

/// --capacity (returned), --fpp, --layout, --parquet-compatible.
CLI::Option* add_sizing_options(CLI::App* cmd, sizing_options& sizing, const char* capacity_help) {
  CLI::Option* capacity = cmd->add_option("--capacity", sizing.capacity, capacity_help)
      ->check(whole_number(1, std::uint64_t{1} << 40));
  cmd->add_option("--fpp", sizing.fpp, "Target false-positive probability in (0, 1) (default 0.01)")
      ->check(open_unit_interval());
  CLI::Option* layout_opt =
      cmd->add_option_function<std::string>(
             "--layout",
             [&sizing](const std::string& text) {
               sizing.s = parse_layout(text);
               sizing.layout_given = true;
             },
             "Block shape W/K[/SEED]: W words per block (1, 2, 4, 8, 16), K bits per key "
             "(W..32), xxh64 seed (default 8/8/0, Parquet's SBBF)")
          ->check([](const std::string& text) -> std::string {
            try {
              parse_layout(text);
              return "";
            } catch (const usage_error& e) {
              return e.what();
            }
          });
  cmd->add_flag("--parquet-compatible", sizing.parquet_compatible,
                "Size for Parquet export: layout 8/8/0, power-of-two size in 32 B..128 MiB")
      ->excludes(layout_opt);
  return capacity;
}

/// --counting and --counter-bits (create, build): a counting filter (docs/counting.md).
CLI::Option* add_counting_options(CLI::App* cmd, sizing_options& sizing) {
  CLI::Option* counting = cmd->add_flag_callback(
      "--counting", [&sizing] { if (sizing.counter_bits == 0) sizing.counter_bits = 4; },
      "A counting filter (keys can be removed with `gbf remove`): 4-bit counters, 4x the memory");
  cmd->add_option_function<unsigned>(
         "--counter-bits", [&sizing](const unsigned& bits) { sizing.counter_bits = bits; },
         "With --counting: bits per counter, 4 (default) or 8")
      ->check(CLI::IsMember({4u, 8u}))
      ->needs(counting)
      ->trigger_on_parse();
  return counting;
}

/// --scaling and its growth options (cli/scaling.hpp, docs/scaling.md).
CLI::Option* add_scaling_options(CLI::App* cmd, scaling_options& scaling) {
  CLI::Option* on = cmd->add_flag(
      "--scaling", scaling.enabled,
      "Make a scaling filter: a chain of levels that grows past --capacity keys and keeps the "
      "expected total FPR under --fpp (RedisBloom BF.RESERVE)");
  CLI::Option* expansion =
      cmd->add_option("--expansion", scaling.expansion,
                      "Scaling: each new level takes this many times the keys of the last (default 2)")
          ->check(whole_number(1, 1u << 16))->needs(on);
  CLI::Option* tightening = cmd->add_option("--tightening", scaling.tightening,
                  "Scaling: level i's target fpp is fpp (1 - r) r^i for this r in (0, 1) (default 0.5); "
                  "1: every level at --fpp, the total FPR growing with the levels (Hadoop's dynamic filter)")
      ->check([](const std::string& text) -> std::string {
        const double r = std::strtod(text.c_str(), nullptr);
        return r > 0 && r <= 1 ? "" : "must be in (0, 1], got " + text;
      })
      ->needs(on);
  cmd->add_flag("--non-scaling", scaling.non_scaling,
                "Scaling: one level that refuses keys past --capacity (RedisBloom NONSCALING)")
      ->needs(on)
      ->excludes(expansion)
      ->excludes(tightening);
  return on;
}

void add_output(CLI::App* cmd, filter_file& output, run_options& run) {
  cmd->add_option("-o,--output", output.path, "Filter file to write (atomically; a symbolic link is followed)")
      ->required()
      ->check(nonempty_path());
  add_format_options(cmd, {&output}, "--format", "Output format");
  add_wait_flag(cmd, run);
}

extern "C" void on_fatal_signal(int sig);

void install_fatal_signal_handler(int sig) {
  struct sigaction action {};
  action.sa_handler = on_fatal_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND | SA_NODEFER;
  sigaction(sig, &action, nullptr);
}

volatile std::sig_atomic_t signal_deferred = 0;

extern "C" void on_fatal_signal(int sig) {
  // Every command writes at most one file, as its last step. Once it is in
  // place the work is done: ending now would report a failure for a write that
  // happened, and a script that retries on 143 would add its keys to a
  // counting filter twice. The command runs to its end instead (the
  // directory's fsync, a summary line) and exits 0. A second signal ends it at
  // once, with status 0 all the same (130 / 143 would say the file was not
  // replaced); SIGPIPE, a reader of the summary that went away, changes nothing.
  if (gbf::any_save_committed()) {
    if (sig == SIGPIPE || signal_deferred == 0) {
      signal_deferred = 1;
      install_fatal_signal_handler(sig);  // SA_RESETHAND took it away
      return;
    }
    gbf::remove_unfinished_files();  // the lock file
    _exit(0);
  }
  gbf::remove_unfinished_files();
  // SA_RESETHAND restored the default action and SA_NODEFER leaves the signal
  // unblocked: raising it again ends the process as the signal would have.
  raise(sig);
}

/// Installs on_fatal_signal, except for signals the parent set to be ignored
/// (nohup, background jobs of non-interactive shells), which stay ignored.
void remove_temporary_files_on_signals() {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    install_fatal_signal_handler(sig);
  }
}

/// A closed standard descriptor is handed to the next open(): a lock file
/// became stdout and took `query --out R --select`'s rows (exit 0), and with
/// stdin closed `build -` read a lock file as its keys. Each closed one gets
/// /dev/null opened the other way round, so its I/O still fails with EBADF,
/// as it would have, and no file of gbf's lands on it.
void occupy_closed_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int opened = ::open("/dev/null", (fd == 0 ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
    if (opened >= 0 && opened != fd) {
      ::dup2(opened, fd);
      ::close(opened);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  occupy_closed_standard_descriptors();
  // Past `ulimit -f` a write fails with EFBIG (a named error, temporaries
  // removed) instead of SIGXFSZ ending the process with no message.
  ::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"gbf: GPU batch membership engine (blocked Bloom filters on GPU and CPU)"};
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       std::string("gbf ") + GBF_VERSION_STRING + " (library " + gbf::library_version() +
                           (gbf::library_has_cuda() ? ", with the CUDA backend)" : ", CPU backend only)"),
                       "Print gbf's version and whether it has the CUDA backend, then exit");
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "gbf: " + std::string(e.what()) + "\nRun with --help for more information.\n";
  });
  std::function<int()> command;

  demo_options demo;
  CLI::App* demo_cmd = app.add_subcommand(
      "demo", "Build one filter per backend, probe it, and compare keys/s, FPR and answers");
  demo_cmd->add_option("--keys", demo.keys, "Keys to add (the filter's capacity)")
      ->check(whole_number(1, std::uint64_t{1} << 40));
  demo_cmd->add_option("--probes", demo.probes, "Absent keys to probe")
      ->check(whole_number(1, std::uint64_t{1} << 40));
  demo_cmd->add_option("--fpp", demo.fpp, "Target false-positive rate, in (0, 1)")
      ->check(open_unit_interval());
  add_threads_option(demo_cmd, demo.threads, "CPU threads for the multi-threaded row (0 = all; at most 1024)");
  demo_cmd->add_option("--backend", demo.where, "auto (every backend), cpu or gpu")
      ->transform(one_of(backend_names));
  // A plain flag and the inversion in the callback: CLI11 prints a negated
  // flag ("!--no-verify") as "--no-verify{false}" in --help.
  bool demo_no_verify = false;
  demo_cmd->add_flag("--no-verify", demo_no_verify, "Skip recomputing GPU answers on the CPU");
  demo_cmd->final_callback([&] {
    demo.verify = !demo_no_verify;
    command = [&] { return run_demo(demo); };
  });

  bench_options bench;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "CPU vs GPU: keys/s over batch and filter sizes, FPR, verification, crossover");
  bench_cmd->add_option("--batches", bench.batches, "Batch sizes, e.g. 1e3,1e5 (default 1e3..1e7; --full 1e3..1e9)")
      ->delimiter(',');
  bench_cmd->add_option("--filter-mib", bench.filter_mib, "Filter sizes in MiB (default: half the L2 and 4x the last-level cache, read at run time; --full adds 512,4096)")
      ->delimiter(',');
  bench_cmd->add_option("--kinds", bench.kinds, "Filters: plain,counting (default plain; counting = gbf::counting_filter of the same layout, and counting/plain time ratios when both run)")
      ->delimiter(',')->check(CLI::IsMember({"plain", "counting"}));
  bench_cmd->add_option("--ops", bench.ops, "Operations: add,contains,remove,remove-unchecked (default add,contains; remove ops need --kinds counting)")
      ->delimiter(',')->check(CLI::IsMember({"add", "contains", "remove", "remove-unchecked"}));
  bench_cmd->add_option("--backends", bench.backends, "cpu1,cpu,gpu-device,gpu-host (default: every available one)")
      ->delimiter(',')->check(CLI::IsMember({"cpu1", "cpu", "gpu-device", "gpu-host"}));
  bench_cmd->add_option("--repeat", bench.repeat, "Timed runs per row after a warm-up; the median is reported")
      ->check(CLI::Range(1u, 1000u));
  bench_cmd->add_option("--fpp", bench.fpp, "FPR the filter is filled to before contains rows, in (0, 1)")
      ->check(CLI::Range(1e-9, 0.999999));
  add_threads_option(bench_cmd, bench.threads, "Threads of the 'cpu' backend (0 = all; at most 1024)");
  bench_cmd->add_flag("--full", bench.full, "Full sweep: batches 1e3..1e9, filters 1..4096 MiB");
  bench_cmd->add_option("--json", bench.json, "Write the results as JSON to this file")->check(nonempty_path());
  bench_cmd->add_option("--plot", bench.plot, "Write a PNG plot (keys/s vs batch size) with gnuplot");
  bench_cmd->final_callback([&] { command = [&] { return run_bench(bench); }; });

  create_args create;
  CLI::App* create_cmd = app.add_subcommand("create", "Create an empty filter sized for --capacity keys at --fpp");
  add_sizing_options(create_cmd, create.sizing, "Distinct keys the filter is sized for")->required();
  add_output(create_cmd, create.output, create.run);
  add_no_header_flag(create_cmd, {&create.output});
  add_run_options(create_cmd, create.run);
  cuckoo_create_options create_cuckoo;
  CLI::Option* cuckoo_flag = add_cuckoo_create_options(create_cmd, create_cuckoo);
  // One filter kind per file: the kinds' flags exclude one another.
  CLI::Option* counting_flag = add_counting_options(create_cmd, create.sizing);
  CLI::Option* scaling_flag = add_scaling_options(create_cmd, create.scaling);
  counting_flag->excludes(scaling_flag);
  cuckoo_flag->excludes(counting_flag)->excludes(scaling_flag);
  create_cmd->final_callback([&] {
    command = [&] { return create_cuckoo.enabled ? run_cuckoo_create(create, create_cuckoo) : run_create(create); };
  });

  build_args build;
  CLI::App* build_cmd = app.add_subcommand("build", "Create a filter from a key file");
  add_keys_options(build_cmd, build.keys);
  add_sizing_options(build_cmd, build.sizing,
                     "Distinct keys to size for (default: the number of keys in KEYS, duplicates "
                     "counted, found by a first pass over the file)");
  add_output(build_cmd, build.output, build.run);
  add_no_header_flag(build_cmd, {&build.output});
  add_run_options(build_cmd, build.run);
  build_cmd->add_flag("--verify", build.verify, "Check every key is found afterwards, recomputing answers on the CPU");
  add_counting_options(build_cmd, build.sizing)
      ->excludes(add_scaling_options(build_cmd, build.scaling));
  build_cmd->final_callback([&] { command = [&] { return run_build(build); }; });

  add_args add;
  CLI::App* add_cmd = app.add_subcommand("add", "Add the keys of a file to a filter file (rewritten atomically)");
  add_cmd->add_option("FILTER", add.target.path, "Filter file")->required();
  add_keys_options(add_cmd, add.keys);
  add_format_options(add_cmd, {&add.target}, "--format", "Format of FILTER");
  add_no_header_flag(add_cmd, {&add.target});
  add_run_options(add_cmd, add.run);
  add_wait_flag(add_cmd, add.run);
  add_cmd->add_flag("--verify", add.verify, "Check every key is found afterwards, recomputing answers on the CPU");
  add_cmd->add_flag("--unique", add.unique, "Cuckoo filters: add only keys not present yet (CF.ADDNX)");
  add_cmd->final_callback([&] { command = [&] { return run_add(add); }; });

  query_args query;
  CLI::App* query_cmd = app.add_subcommand(
      "query", "Test the keys of a file against a filter (default: print how many may be present)");
  query_cmd->add_option("FILTER", query.target.path, "Filter file")->required();
  add_keys_options(query_cmd, query.keys);
  add_format_options(query_cmd, {&query.target}, "--format", "Format of FILTER");
  add_no_header_flag(query_cmd, {&query.target});
  CLI::Option* out_opt =
      query_cmd->add_option("--out", query.out, "Write one answer per key to this file (atomically)")
          ->check(nonempty_path());
  query_cmd->add_option("--out-format", query.out_format,
                        "bytes (one 0/1 byte per key, default), bitmap (LSB-first bits, Arrow), "
                        "text (0/1 lines)")
      ->transform(one_of(result_format_names))
      ->needs(out_opt);
  CLI::Option* count_opt = query_cmd->add_flag("--count", query.count, "Print only the number of keys that may be present");
  CLI::Option* select_opt =
      query_cmd->add_flag("--select", query.select, "Print the keys that may be present, one per line");
  query_cmd->add_flag("--row-numbers", query.row_numbers, "With --select: print 0-based row numbers instead of keys")
      ->needs(select_opt);
  count_opt->excludes(select_opt);
  CLI::Option* counts_opt = query_cmd
      ->add_flag("--counts", query.counts,
                 "Counting and cuckoo filters: print each key's approximate count, one per line "
                 "(the smallest of its counters; a cuckoo filter's copies of its tag, CF.COUNT)")
      ->excludes(count_opt)
      ->excludes(select_opt)
      ->excludes(out_opt);
  query_cmd->add_flag("--verify", query.verify, "Recompute every answer on the CPU; exit 1 on a mismatch")
      ->excludes(counts_opt);
  add_run_options(query_cmd, query.run);
  add_wait_flag(query_cmd, query.run);
  query_cmd->final_callback([&] { command = [&] { return run_query(query); }; });

  info_args info;
  CLI::App* info_cmd = app.add_subcommand(
      "info", "Describe a filter file: layout, size, fill, estimated keys and FPR");
  info_cmd->add_option("FILTER", info.target.path, "Filter file")->required();
  add_format_options(info_cmd, {&info.target}, "--format", "Format of FILTER");
  add_no_header_flag(info_cmd, {&info.target});
  info_cmd->add_flag("--json", info.json, "One JSON object instead of text");
  add_run_options(info_cmd, info.run);
  info_cmd->final_callback([&] { command = [&] { return run_info(info); }; });

  remove_args remove;
  CLI::App* remove_cmd = app.add_subcommand(
      "remove",
      "Remove one copy of each key of a file from a counting or cuckoo filter file (rewritten "
      "atomically); keys not in the filter are refused and counted");
  remove_cmd->add_option("FILTER", remove.target.path, "Counting or cuckoo filter file")->required();
  add_keys_options(remove_cmd, remove.keys);
  CLI::Option* unchecked = remove_cmd->add_flag(
      "--unchecked", remove.unchecked,
      "Counting filters: decrement without testing each key first, only for keys known to be "
      "held (removing an absent key can cause false negatives)");
  remove_cmd->add_flag("--strict", remove.strict,
                       "Fail, leaving the file unchanged, when some key is not in the filter")
      ->excludes(unchecked);
  add_run_options(remove_cmd, remove.run);
  add_wait_flag(remove_cmd, remove.run);
  remove_cmd->final_callback([&] { command = [&] { return run_remove(remove); }; });

  project_args project;
  CLI::App* project_cmd = app.add_subcommand(
      "project", "Write a counting filter's projection (bit set where a counter is nonzero) as a plain filter");
  project_cmd->add_option("FILTER", project.input, "Counting filter file")->required();
  add_output(project_cmd, project.output, project.run);
  add_no_header_flag(project_cmd, {&project.output});
  add_run_options(project_cmd, project.run);
  project_cmd->final_callback([&] { command = [&] { return run_project(project); }; });

  combine_args merge;
  combine_args intersect;
  combine_args symmetric_difference;
  for (auto [name, args, run, help] :
       {std::tuple{"merge", &merge, &run_merge,
                   "Union of two filters of the same layout (bitwise OR; counting filters: counters "
                   "added; scaling filters: the chains merged level by level; cuckoo filters: B's tags "
                   "inserted into A's table)"},
        std::tuple{"intersect", &intersect, &run_intersect,
                   "Intersection of two filters of the same layout (bitwise AND; counting filters: the "
                   "smaller of each counter)"},
        std::tuple{"xor", &symmetric_difference, &run_xor,
                   "Bits set in exactly one of two filters of the same layout (bitwise XOR; Hadoop's xor): "
                   "the delta between two versions of a filter, which xor applies back"}}) {
    CLI::App* cmd = app.add_subcommand(name, help);
    cmd->add_option("A", args->a.path, "First filter file")->required();
    cmd->add_option("B", args->b.path, "Second filter file")->required();
    add_output(cmd, args->output, args->run);
    add_format_options(cmd, {&args->a, &args->b}, "--input-format", "Format of A and B");
    add_no_header_flag(cmd, {&args->a, &args->b, &args->output});
    add_run_options(cmd, args->run);
    cmd->final_callback([&command, args = args, run = run] { command = [args, run] { return run(*args); }; });
  }

  join_args join;
  CLI::App* join_cmd = app.add_subcommand(
      "join", "TPC-H-like join: prefilter lineitem with a filter on the qualifying orders, vs no filter");
  join_cmd->add_option("--sf", join.sf, "Scale factor (1 = 1.5M orders, ~6M lineitems)");
  join_cmd->add_option("--selectivity", join.selectivity, "Fraction of orders passing the date predicate, in (0, 1]");
  join_cmd->add_option("--seed", join.seed, "Data generation seed")
      ->check(whole_number(0, std::numeric_limits<std::uint64_t>::max()));
  join_cmd->add_option("--backend", join.where, "Where the filter runs: auto (GPU if present), gpu or cpu")
      ->transform(one_of(backend_names));
  add_threads_option(join_cmd, join.threads, "CPU threads (0 = all hardware threads; at most 1024)");
  join_cmd->add_option("--fpp", join.fpp, "Filter target false-positive rate, in (0, 1)")
      ->check(open_unit_interval());
  join_cmd->add_option("--export-csv", join.export_csv, "Write orders.csv and lineitem.csv to this directory (made if missing)")
      ->check(nonempty_path());
  join_cmd->add_flag("--json", join.json, "One JSON object instead of text");
  join_cmd->final_callback([&] { command = [&] { return run_join(join); }; });

  add_parquet_command(app, command);

  // CLI11 answers a mistyped subcommand ("gbf crate") with "A subcommand is
  // required"; name the word it did not know instead.
  if (argc > 1 && argv[1][0] != '-' &&
      app.get_subcommands([&](const CLI::App* sub) { return sub->get_name() == argv[1]; }).empty()) {
    std::string names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    std::fprintf(stderr, "gbf: unknown subcommand '%s' (one of: %s)\nRun with --help for more information.\n",
                 argv[1], names.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  remove_temporary_files_on_signals();
  try {
    const int status = command();
    flush_summaries();
    return status;
  } catch (const usage_error& e) {
    std::fprintf(stderr, "gbf: %s\n", printable(e.what()).c_str());
    return 2;
  } catch (const gbf::error& e) {
    // A path may hold a newline or an escape sequence: the message stays one plain line.
    std::fprintf(stderr, "gbf: %s\n", printable(e.what()).c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "gbf: out of memory\n");
    return 1;
  }
}
