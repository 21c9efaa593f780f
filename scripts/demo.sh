#!/usr/bin/env bash
# The main job: builds gbf and runs the CPU-versus-GPU demo (10M keys added,
# 100M probed). Without a GPU it runs the CPU rows and says so.
# Extra arguments go to `gbf demo` (see `build/release/cli/gbf demo --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/env.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target gbf_cli
build/release/cli/gbf demo "$@"
