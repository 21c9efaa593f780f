#!/usr/bin/env bash
# Builds gbf (GPU backend too when nvcc exists) and runs every test: CTest, then the
# Python package's pytest suite. GPU tests skip with a reason on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/env.sh
jobs=$(nproc)
cmake --preset release
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

# The Python package (python/): pip installs it, its extension linked against the library
# just built (installed into a scratch prefix, so nvcc does not compile the kernels again),
# then runs its tests, which compare every operation with this build's CLI.
cmake --install build/release --prefix build/release/python-prefix >/dev/null
python3 -m pip install --quiet --root-user-action=ignore --no-build-isolation ./python \
  -C cmake.define.GBF_PREBUILT="$PWD/build/release/python-prefix" -C build-dir="$PWD/build/python"
GBF_CLI="$PWD/build/release/cli/gbf" python3 -m pytest -q python/tests
