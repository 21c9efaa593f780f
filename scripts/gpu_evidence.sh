#!/usr/bin/env bash
# Runs on the device machine, over a tree prepared here by scripts/device_prep.sh,
# one stage of the GPU evidence the open issues need. Each stage fits in one
# device command (10 min) and writes OUT_DIR/<stage>.log whose first lines are
#   device: <GPU name>
#   driver: <driver version>
#   commit: <COMMIT>
#   command: <the exact command>
# then everything the command printed, and "exit status: N" last; JSON results
# go beside it. Copy OUT_DIR into bench/results/<date>-<gpu>/ and commit it.
#
#   usage: scripts/gpu_evidence.sh STAGE OUT_DIR COMMIT
#
# Stages (rough device minutes on an H100/H200):
#   tests      the whole test suite (GPU tests included)                      ~2
#   sanitize   compute-sanitizer memcheck + racecheck on the GPU tests         ~5
#   sweep      gbf bench --full without cpu1 (JSON and gnuplot script; make
#              the PNG here: gnuplot OUT_DIR/sweep.gp)                         ~8
#   strings    gbf_bench_strings (URL / id / long-tail mixes vs the bound)     ~3
#   join       gbf join on the GPU: SF 1 and 10 x selectivity 1/5/25/100 %     ~4
#   demo       scripts/demo.sh's command: gbf bench with the defaults          ~1
# The kernel benchmarks (gbf_bench_gpu) have their own script, scripts/gpu_bench.sh
# (docs/performance.md). The binaries come from build/device (carry: .devlib build/device/tests/gbf_tests
# build/device/cli/gbf build/device/bench/gbf_bench_gpu build/device/bench/gbf_bench_strings).
set -uo pipefail
cd "$(dirname "$0")/.."
stage=${1:?usage: scripts/gpu_evidence.sh STAGE OUT_DIR COMMIT} out=${2:?output directory} commit=${3:?commit sha of the code that was built}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export LD_LIBRARY_PATH="$PWD/.devlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
query=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)
device=${query%,*}
driver=${query##*, }
tests=build/device/tests/gbf_tests
gbf=build/device/cli/gbf
status=0

# run NAME COMMAND...: runs COMMAND, logging it under NAME with the header.
run() {
  local name=$1
  shift
  {
    echo "device: $device"
    echo "driver: $driver"
    echo "commit: $commit"
    echo "command: $*"
    "$@" 2>&1
    echo "exit status: $?"
  } > "$out/$name.log"
  tail -n 3 "$out/$name.log"
  grep -q '^exit status: 0$' "$out/$name.log" || status=1
}

case $stage in
  tests)
    run tests "$tests" ;;
  sanitize)
    filter='*Gpu*'
    run memcheck compute-sanitizer --tool memcheck --error-exitcode 1 "$tests" --gtest_filter="$filter"
    run racecheck compute-sanitizer --tool racecheck --error-exitcode 1 "$tests" --gtest_filter="$filter" ;;
  sweep)
    run sweep "$gbf" bench --full --repeat 3 --backends cpu,gpu-device,gpu-host \
      --json "$out/sweep.json" --plot "$out/sweep.png" ;;
  strings)
    run strings build/device/bench/gbf_bench_strings --benchmark_format=json \
      "--benchmark_out=$out/strings.json" ;;
  join)
    run join env OUT_TSV="$out/join.tsv" docs/join-prefilter/measure.sh "$gbf" --backend gpu ;;
  demo)
    run demo "$gbf" bench --json "$out/demo.json" --plot "$out/demo.png" ;;
  *)
    echo "unknown stage '$stage' (tests, sanitize, sweep, strings, join, demo)" >&2
    exit 2 ;;
esac
exit $status
