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

# Python packages: duckdb for tests/join/check_duckdb.sh; the gbf Python package's build
# (nanobind, scikit-build-core, numpy) and test (pyarrow, pytest; dask[dataframe] and
# distributed for gbf.dask; mypy for the package's type check) requirements, so that
# scripts/test.sh can `pip install ./python` without build isolation (no second download).
python_packages=(duckdb:duckdb nanobind:nanobind scikit_build_core:scikit-build-core numpy:numpy
                 pyarrow:pyarrow pytest:pytest "dask.dataframe:dask[dataframe]" distributed:distributed
                 mypy:mypy)
missing_python=()
for entry in "${python_packages[@]}"; do
  python3 -c "import ${entry%%:*}" 2>/dev/null || missing_python+=("${entry#*:}")
done
if ((${#missing_python[@]})); then
  echo "setup: pip installing ${missing_python[*]}" >&2
  python3 -m pip install --quiet --root-user-action=ignore "${missing_python[@]}"
fi
# The extension compiles against Python's headers (Debian's system Python keeps them in python3-dev).
if ! python3 -c 'import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then
  echo "setup: installing python3-dev (Python.h)" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq python3-dev >/dev/null
fi
