#!/usr/bin/env bash
# Installs what gbf needs to build and test on a fresh Debian/Ubuntu machine,
# skipping packages that are already there. The CUDA toolkit is not installed
# here: with nvcc on PATH (or in /usr/local/cuda/bin) gbf builds its GPU
# backend, without it the CPU backend alone.
set -euo pipefail

packages=(cmake make g++ libgtest-dev libgmock-dev libbenchmark-dev libxxhash-dev libcli11-dev gnuplot-nox)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -c 'import duckdb' 2>/dev/null || python3 -m pip install --quiet duckdb  # tests/join/check_duckdb.sh
