#!/usr/bin/env bash
# Runs on the device machine over a tree prepared by scripts/device_prep.sh:
# the whole test suite, the GPU tests under compute-sanitizer (memcheck and
# racecheck), and the demo. Each run writes OUT_DIR/<name>.log whose first
# lines are device, driver, commit and command, then the run's output.
#   usage: scripts/gpu_validate.sh OUT_DIR COMMIT
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?output directory} commit=${2:?commit sha of the code that was built}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.devlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)
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

tests=build/device/tests/gbf_tests
run tests "$tests"
gpu_filter='*Gpu*'
run memcheck compute-sanitizer --tool memcheck --error-exitcode 1 "$tests" --gtest_filter="$gpu_filter"
run racecheck compute-sanitizer --tool racecheck --error-exitcode 1 "$tests" --gtest_filter="$gpu_filter"
run demo build/device/cli/gbf demo
exit $status
