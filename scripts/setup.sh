#!/usr/bin/env bash
# Installs what gbf needs to build and test on a fresh Debian/Ubuntu machine,
# skipping packages that are already there. The CUDA toolkit is not installed
# here: with nvcc on PATH (or in /usr/local/cuda/bin) gbf builds its GPU
# backend, without it the CPU backend alone.
#
# Python: gbf's Python packages go into the python3 on PATH when pip may install
# there; a distribution's own Python that refuses (PEP 668, "externally managed",
# as Debian 12 and Ubuntu 24.04's do), or whose pip is older than 23.1, gets a
# virtual environment, build/venv, which scripts/env.sh then puts first on PATH
# for every script. A cmake older than the 3.25 the build needs (Ubuntu 22.04
# ships 3.22) is pip-installed there too.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
apt_updated=0
apt_install() {  # apt_install PACKAGE...: installs those not installed yet
  local missing=() p
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "setup: installing ${missing[*]}" >&2
  if [ "$apt_updated" = 0 ]; then
    "${sudo_cmd[@]}" apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
}

apt_install cmake make g++ libgtest-dev libgmock-dev libbenchmark-dev libxxhash-dev libcli11-dev gnuplot-nox

venv=$PWD/build/venv
use_venv() {  # makes build/venv (once) and puts it first on PATH for the rest of this script
  if [ ! -x "$venv/bin/python3" ]; then
    python3 -c 'import ensurepip' 2>/dev/null || apt_install python3-venv
    echo "setup: making the virtual environment $venv" >&2
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
    # A distribution's venv may seed an old pip (Debian 12: 23.0, before `-C`).
    "$venv/bin/python3" -m pip install --quiet --upgrade pip
  fi
  export PATH="$venv/bin:$PATH"
}
[ ! -x "$venv/bin/python3" ] || use_venv
if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
  apt_install python3 python3-pip python3-venv python3-dev
fi
if python3 - <<'PY'
import os, sys, sysconfig
managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
sys.exit(0 if managed and sys.prefix == sys.base_prefix else 1)
PY
then
  use_venv
fi
# scripts/test.sh passes the extension's CMake settings with pip's -C (pip 23.1).
if ! python3 - <<'PY'
import sys
from importlib.metadata import version
sys.exit(0 if tuple(int(p) for p in version("pip").split(".")[:2]) >= (23, 1) else 1)
PY
then
  echo "setup: pip $(python3 -m pip --version | cut -d' ' -f2) is older than 23.1; using a virtual environment" >&2
  use_venv
fi
cmake_version=$(cmake --version | head -n 1 | grep -o '[0-9][0-9.]*' | head -n 1)
if [ "$(printf '%s\n' 3.25 "$cmake_version" | sort -V | head -n 1)" != 3.25 ]; then
  echo "setup: cmake $cmake_version is older than 3.25; pip installing a newer one" >&2
  use_venv
  python3 -m pip install --quiet 'cmake>=3.25'
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
  apt_install python3-dev
fi
