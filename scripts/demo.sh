#!/usr/bin/env bash
# The main job: builds gbf and runs `gbf bench`, the CPU-versus-GPU comparison
# (keys/s over batch sizes 1e3..1e7 and two filters, one in the L2 and one 4x the
# last-level cache, read at run time; add and
# contains, FPR and verification per row, the batch size where the GPU starts
# to win). Without a GPU it runs the CPU rows and says so. Writes
# build/bench.json and build/bench.png (the plot needs gnuplot).
# Extra arguments go to `gbf bench` (e.g. --full; see `build/release/cli/gbf bench --help`).
# The older fixed-size demo is still there: build/release/cli/gbf demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/env.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target gbf_cli
build/release/cli/gbf bench --json build/bench.json --plot build/bench.png "$@"
