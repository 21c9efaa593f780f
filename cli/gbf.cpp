// The gbf command.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>
#include <string>

#include "cli/demo.hpp"
#include "gbf/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"gbf: GPU batch membership engine (blocked Bloom filters on GPU and CPU)"};
  app.require_subcommand(1);

  gbf::cli::demo_options demo;
  const std::map<std::string, gbf::backend> backends{
      {"auto", gbf::backend::automatic}, {"cpu", gbf::backend::cpu}, {"gpu", gbf::backend::gpu}};
  CLI::App* demo_cmd = app.add_subcommand(
      "demo", "Build one filter per backend, probe it, and compare keys/s, FPR and answers");
  demo_cmd->add_option("--keys", demo.keys, "Keys to add (the filter's capacity)")
      ->check(CLI::Range(1ULL, 1ULL << 40));
  demo_cmd->add_option("--probes", demo.probes, "Absent keys to probe")
      ->check(CLI::Range(1ULL, 1ULL << 40));
  demo_cmd->add_option("--fpp", demo.fpp, "Target false-positive rate, in (0, 1)");
  demo_cmd->add_option("--threads", demo.threads, "CPU threads for the multi-threaded row (0 = all)");
  demo_cmd->add_option("--backend", demo.where, "auto (every backend), cpu or gpu")
      ->transform(CLI::CheckedTransformer(backends, CLI::ignore_case));
  demo_cmd->add_flag("!--no-verify", demo.verify, "Skip recomputing GPU answers on the CPU");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (*demo_cmd) return gbf::cli::run_demo(demo);
  } catch (const gbf::error& e) {
    std::fprintf(stderr, "gbf: %s\n", e.what());
    return 1;
  }
  return 0;
}
