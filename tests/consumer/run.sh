#!/usr/bin/env bash
# CTest driver: installs gbf from the build tree into a scratch prefix, builds
# the consumer against it with find_package, then builds a CPU-only consumer
# through add_subdirectory; both must run and find every key.
set -euo pipefail
source_dir=$1 build_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir/tests/consumer" -B "$work/package" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/package" >/dev/null
"$work/package/consumer"
cmake -S "$source_dir/tests/consumer" -B "$work/subdirectory" -DGBF_CONSUMER_MODE=subdirectory \
  -DGBF_SOURCE_DIR="$source_dir" -DGBF_ENABLE_CUDA=OFF >/dev/null
cmake --build "$work/subdirectory" -j "$(nproc)" >/dev/null
"$work/subdirectory/consumer"
