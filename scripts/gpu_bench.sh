#!/usr/bin/env bash
# Runs on the device machine: the GPU benchmark suite (gbf_bench_gpu, see
# docs/performance.md) with JSON results and a headed log:
#   bench/results/NAME.json  Google Benchmark's JSON (--benchmark_out)
#   bench/results/NAME.log   first lines exactly
#                              device: <GPU name>
#                              driver: <driver version>
#                              commit: <commit>
#                              command: <the exact command>
#                            then everything the command printed.
#   usage: scripts/gpu_bench.sh NAME [COMMIT] [-- EXTRA_BENCHMARK_ARGS...]
# COMMIT defaults to `git rev-parse HEAD` (the device machine's copy of the tree
# may have no .git: then pass it). The binary is .device/bin/gbf_bench_gpu
# (.device/bin, carried: scripts/device_prep.sh builds it here; the device machine
# has no Google Benchmark), else $GBF_BENCH_GPU, else it is built with
# `cmake --preset native` (needs libbenchmark-dev).
set -uo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: scripts/gpu_bench.sh NAME [COMMIT] [-- EXTRA_BENCHMARK_ARGS...]}
shift
commit=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  commit=$1
  shift
fi
if [ $# -gt 0 ] && [ "$1" = "--" ]; then shift; fi
[ -n "$commit" ] || commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)

source scripts/env.sh
source scripts/device_env.sh

bin=${GBF_BENCH_GPU:-.device/bin/gbf_bench_gpu}
if [ ! -x "$bin" ]; then
  echo "gpu_bench: no $bin; building with the native preset" >&2
  cmake --preset native >/dev/null || exit 1
  cmake --build --preset native -j "$(nproc)" --target gbf_bench_gpu || exit 1
  bin=build/native/bench/gbf_bench_gpu
fi

query=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)
device=${query%,*}
driver=${query##*, }

mkdir -p bench/results
json=bench/results/$name.json
log=bench/results/$name.log
cmd=("$bin" --benchmark_format=json "--benchmark_out=$json" "$@")
{
  echo "device: $device"
  echo "driver: $driver"
  echo "commit: $commit"
  echo "command: ${cmd[*]}"
  "${cmd[@]}" 2>&1
  echo "exit status: $?"
} > "$log"
grep -q '^exit status: 0$' "$log"
status=$?

# A short table for the reply (the full numbers are in the JSON).
if command -v python3 >/dev/null 2>&1 && [ -s "$json" ]; then
  python3 - "$json" <<'EOF' | tee "bench/results/$name.summary.txt"
import json, sys
data = json.load(open(sys.argv[1]))
print(data["context"].get("gpu", "?"), "| cuco:", data["context"].get("cuco", "?"))
print(f"{'row':<72} {'Gkeys/s':>8} {'of bound':>8} {'extra':>24}")
for b in data["benchmarks"]:
    name = b["name"]
    if b.get("error_occurred"):
        print(f"{name:<72} skipped: {b.get('error_message', '')}"[:160])
        continue
    rate = b.get("keys_per_s", b.get("items_per_second", 0.0))
    frac = b.get("fraction_of_bound")
    extra = ""
    if "fpr" in b:
        extra += f"fpr {b['fpr']:.4g} "
    if "gbf_speedup" in b:
        extra += f"gbf x{b['gbf_speedup']:.2f} "
    if name.startswith("bound/"):
        extra += f"{b.get('bytes_per_second', 0) / 1e9:.1f} GB/s"
    frac_text = f"{frac:8.3f}" if frac is not None else f"{'':8}"
    print(f"{name:<72} {rate / 1e9:8.3f} {frac_text} {extra:>24}")
EOF
fi
tail -n 2 "$log"
exit $status
