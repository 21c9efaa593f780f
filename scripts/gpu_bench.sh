#!/usr/bin/env bash
# Runs on the device machine: the GPU benchmark suite (gbf_bench_gpu, see
# docs/performance.md) with JSON results and a headed log, written straight into
# $OUT (the folder the device tool brings back; bench/results/ where it is unset):
#   NAME.json         Google Benchmark's JSON (--benchmark_out, written at the end)
#   NAME.log          first lines exactly
#                       device: <GPU name>
#                       driver: <driver version>
#                       commit: <COMMIT>
#                       command: <the exact command>
#                     then the console table, a row as each finishes (so a run cut
#                     off by the time limit keeps the rows done), "exit status: N" last
#   NAME.summary.txt  a short table for the reply
#   usage: scripts/gpu_bench.sh NAME COMMIT [-- EXTRA_BENCHMARK_ARGS...]
# COMMIT is the full sha scripts/device_prep.sh built (.device/COMMIT; checked by
# scripts/device_check.sh). The binary is .device/bin/gbf_bench_gpu (carried: the
# device machine has no Google Benchmark to build it), else $GBF_BENCH_GPU.
# BENCH_TIMEOUT (s, default 570) bounds the run.
set -uo pipefail
usage="usage: scripts/gpu_bench.sh NAME COMMIT [-- EXTRA_BENCHMARK_ARGS...]"
cd "$(dirname "$0")/.."
name=${1:?$usage}
commit=${2:?$usage}
shift 2
if [ $# -gt 0 ]; then
  [ "$1" = "--" ] || { echo "gpu_bench: '$1': benchmark arguments follow '--'; $usage" >&2; exit 2; }
  shift
fi
if [[ $name == */* || $name == .* ]]; then
  echo "gpu_bench: NAME '$name' must be a plain file name (no '/', not starting with '.')" >&2
  exit 2
fi

source scripts/env.sh
source scripts/device_check.sh  # exits 2: no .device, COMMIT not its build's, no GPU
source scripts/device_env.sh

bin=${GBF_BENCH_GPU:-.device/bin/gbf_bench_gpu}
if [ ! -x "$bin" ]; then
  echo "gpu_bench: no $bin: run scripts/device_prep.sh on the development machine and carry .device" >&2
  exit 2
fi

results=${OUT:-bench/results}
mkdir -p "$results"
json=$results/$name.json
log=$results/$name.log
cmd=(timeout --kill-after=10 "${BENCH_TIMEOUT:-570}" "$bin" "--benchmark_out=$json"
     --benchmark_out_format=json "$@")
{
  echo "device: $device"
  echo "driver: $driver"
  echo "commit: $commit"
  echo "command: $(printf '%q ' "${cmd[@]}")"
  "${cmd[@]}" 2>&1
  echo "exit status: $?"
} > "$log"
grep -q '^exit status: 0$' "$log"
status=$?

# A short table for the reply (the full numbers are in the JSON).
if command -v python3 >/dev/null 2>&1 && [ -s "$json" ]; then
  python3 - "$json" <<'EOF' | tee "$results/$name.summary.txt"
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
