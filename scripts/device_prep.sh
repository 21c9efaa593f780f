#!/usr/bin/env bash
# Prepares, on the development machine, what a GPU session carries to the
# device machine (which has nvcc, cmake, Python 3.12 with NumPy/CuPy/PyTorch/
# pyarrow and the CUDA tools, but not Debian's GoogleTest, Google Benchmark,
# libxxhash or CLI11, and cannot fetch anything). Everything lands in one
# git-ignored folder, so a device call carries a single path, `.device`:
#   .device/bundle.tar.gz  bin/ and lib/, unpacked there into .device/:
#     bin/           the Release binaries for sm_90 (H100/H200) built in build/device:
#                    gbf_tests, gbf_promise_tests, gbf_bench_analysis_tests, gbf (the CLI),
#                    gbf_example_join_probe, gbf_bench_gpu, gbf_bench_strings,
#                    gbf_bench_cuckoo, and gbf_bench_cpu_peers (the CPU stage: thread
#                    scaling on the device machine's cores, which this 2-vCPU machine
#                    cannot show)
#     lib/           the shared libraries they need beyond glibc (lib/cxx: the C++
#                    runtime, for the binaries only)
#   .device/wheels/  the gbf Python package for CPython 3.12 (linked to the same
#                    library) and the wheels its device tests use that the image lacks
#   .device/COMMIT   the sha built (with "-dirty" when tracked files had uncommitted
#                    changes): the device scripts refuse to head logs with another
# Environment: GBF_CUCO_INCLUDE_DIR (a cuCollections include dir, e.g. .peers/cuco/include)
# adds the cuco peer rows to gbf_bench_gpu; GBF_FASTFILTER_DIR (fastfilter_cpp's src/, e.g.
# .peers/fastfilter_cpp/src) adds the SimdBlockFilter rows to gbf_bench_cpu_peers;
# GBF_DEVICE_WHEELS="duckdb==X ..." downloads extra wheels (default: duckdb, for the
# DuckDB cross-checks).
set -euo pipefail
cd "$(dirname "$0")/.."
# What is built, recorded first: the device scripts compare it with the sha they
# are told to write in their log headers. Untracked files do not count (the
# build reads tracked sources only).
built=$(git rev-parse HEAD)
[ -z "$(git status --porcelain --untracked-files=no)" ] || built+="-dirty"
[[ $built != *-dirty ]] || echo "device_prep: warning: uncommitted changes; the device scripts will refuse this prep (commit first)" >&2
scripts/setup.sh
source scripts/env.sh
peer_args=()
[ -n "${GBF_CUCO_INCLUDE_DIR:-}" ] && peer_args+=(-DGBF_CUCO_INCLUDE_DIR="$(realpath "$GBF_CUCO_INCLUDE_DIR")")
# x86-64-v3 (AVX2, what SimdBlockFilter needs), not this machine's -march=native:
# the device machine's CPU may lack this one's instructions.
[ -n "${GBF_FASTFILTER_DIR:-}" ] && peer_args+=(-DGBF_FASTFILTER_DIR="$(realpath "$GBF_FASTFILTER_DIR")"
                                                -DGBF_FASTFILTER_MARCH=x86-64-v3)
cmake -S . -B build/device -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "${peer_args[@]}" >/dev/null
# Only what runs on the device (the CPU-only fuzz driver stays here; Arrow's
# Parquet peer too, whose libraries would not fit the carry).
targets=(gbf_tests gbf_promise_tests gbf_bench_analysis_tests gbf_cli gbf_example_join_probe
         gbf_bench_gpu gbf_bench_strings gbf_bench_cpu_peers gbf_bench_cuckoo)
cmake --build build/device -j "$(nproc)" --target "${targets[@]}"

# The binaries and their libraries travel as one compressed archive (the device
# tool carries at most 64 MiB; the kernels' fatbins compress about 4x):
# scripts/device_env.sh unpacks it into .device/{bin,lib} there.
stage=build/device/stage
rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib" .device/wheels
find build/device/{tests,cli,bench,examples} -maxdepth 1 -type f -perm -u+x -name 'gbf*' \
  -exec cp -t "$stage/bin" {} +
strip "$stage"/bin/*
for bin in "$stage"/bin/*; do
  ldd "$bin" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' || true
done | sort -u | xargs -r cp -L -t "$stage/lib"
# The C++ runtime apart: the binaries take it (the image's may be older than this
# compiler's), Python must not (PyTorch there needs its own, newer one).
mkdir -p "$stage/lib/cxx"
mv "$stage"/lib/libstdc++.so* "$stage"/lib/libgcc_s.so* "$stage/lib/cxx/" 2>/dev/null || true
rm -rf .device/bin .device/lib .device/COMMIT
tar -czf .device/bundle.tar.gz -C "$stage" bin lib

# The Python package for the device's CPython 3.12, linked to the library just built.
# An older prep's wheel never travels with these binaries.
rm -f .device/wheels/gbf-*.whl
python312=$(PYENV_VERSION=3.12.1 command -v python3.12 || true)
if [ -n "$python312" ]; then
  PYENV_VERSION=3.12.1 "$python312" -m pip install -q --root-user-action=ignore nanobind scikit-build-core numpy
  cmake --install build/device --prefix build/device/python-prefix >/dev/null
  PYENV_VERSION=3.12.1 "$python312" -m pip wheel -q --no-deps --no-build-isolation ./python -w .device/wheels \
    -C cmake.define.GBF_PREBUILT="$PWD/build/device/python-prefix" -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
    -C build-dir="$PWD/build/python-device"
else
  echo "device_prep: no python3.12 here; the Python stage will have no gbf wheel" >&2
fi
for spec in ${GBF_DEVICE_WHEELS:-duckdb}; do
  ls .device/wheels/"${spec%%=*}"-*.whl >/dev/null 2>&1 && continue
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .device/wheels "$spec"
done
echo "$built" > .device/COMMIT
du -sh .device/bundle.tar.gz .device/wheels
echo "device_prep: built $built"

