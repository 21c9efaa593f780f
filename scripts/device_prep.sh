#!/usr/bin/env bash
# Prepares, on the development machine, what a GPU session carries to the
# device machine (which has nvcc, cmake and the CUDA tools but not Debian's
# GoogleTest, Google Benchmark, libxxhash or CLI11, and cannot fetch them):
#   build/device/  a Release build for sm_90 (H100/H200), built here
#   .devlib/       the shared libraries those binaries need beyond glibc
# Both are git-ignored. Carry the binaries, not the whole build (its objects
# pass the 64 MiB limit): the device tool's `carry` takes at most 8 paths, e.g.
#   .devlib build/device/tests/gbf_tests build/device/cli/gbf
#   build/device/bench/gbf_bench_gpu build/device/bench/gbf_bench_strings
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/env.sh
cmake -S . -B build/device -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build build/device -j "$(nproc)"
rm -rf .devlib && mkdir -p .devlib
for bin in build/device/tests/gbf_tests build/device/cli/gbf build/device/bench/gbf_bench*; do
  ldd "$bin" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' || true
done | sort -u | xargs -r cp -L -t .devlib
du -sh build/device .devlib
