#!/usr/bin/env bash
# Builds gbf (GPU backend too when nvcc exists) and runs every test.
# GPU tests skip with a reason on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/env.sh
jobs=$(nproc)
cmake --preset release
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"
