#!/usr/bin/env bash
# Runs on the device machine, over the `.device` folder scripts/device_prep.sh made
# here (carry: .device; its bundle is unpacked on first use), one stage of the GPU evidence the open issues need. Each
# stage fits in one device command (10 min) and writes OUT_DIR/<name>.log whose
# first lines are
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
#   tests      what CTest runs, from the carried binaries (the CPU-only loader fuzz
#              driver aside): the GoogleTest suites (GPU tests included: none may
#              skip), the promise tests, the user-kernel example, the CLI scripts
#              (whose automatic backend is the GPU there) and the DuckDB
#              cross-checks of gbf parquet / gbf join                                ~3
#   gtest      the GoogleTest suite alone (the first item of tests, same checks)    ~1
#   python     the Python package's pytest suite (CuPy, PyTorch, pyarrow device
#              tests included) against the carried wheel                             ~2
#   sanitize   compute-sanitizer memcheck, racecheck, synccheck and initcheck on
#              the GPU tests (SANITIZE_TOOLS picks a subset)                          ~6
#   sweep      gbf bench --full without cpu1 (JSON and PNG)                           ~8
#   strings    gbf_bench_strings (URL / id / long-tail mixes vs the bound)           ~3
#   join       gbf join on the GPU: SF 1 and 10 x selectivity 1/5/25/100 %           ~4
#   demo       scripts/demo.sh's command: gbf bench with the defaults                ~1
#   cpu        gbf_bench_cpu_peers on the device machine's CPU (no GPU): thread scaling
#              of add and contains at T = 1, 2, 4, ... up to its cores, gbf against
#              SimdBlockFilter per core (when prepared with GBF_FASTFILTER_DIR), the
#              cost of a call; CPU_REPEAT (default 5) repeats per cell               ~6
# The kernel benchmarks (gbf_bench_gpu) have their own script, scripts/gpu_bench.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
stage=${1:?usage: scripts/gpu_evidence.sh STAGE OUT_DIR COMMIT} out=${2:?output directory} commit=${3:?commit sha of the code that was built}
mkdir -p "$out"
out=$(cd "$out" && pwd)
source scripts/device_env.sh  # .device/{bin,lib}, LD_LIBRARY_PATH, python_libs
bin=$PWD/.device/bin
query=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)
device=${query%,*}
driver=${query##*, }
gbf=$bin/gbf
status=0

# The carried wheels (gbf, duckdb) go into one scratch site-packages ahead of the image's.
install_wheels() {
  [ -d /tmp/gbf-site ] && return
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/gbf-site \
    .device/wheels/*.whl >/dev/null 2>&1 || echo "warning: a carried wheel did not install" >&2
}

# run NAME COMMAND...: runs COMMAND, logging it under NAME with the header.
run() {
  local name=$1
  shift
  {
    echo "device: $device"
    echo "driver: $driver"
    echo "commit: $commit"
    if declare -F "$1" >/dev/null; then  # a function of this script: it prints its commands
      echo "command: scripts/gpu_evidence.sh $stage (the commands follow)"
    else
      echo "command: $*"
    fi
    "$@" 2>&1
    echo "exit status: $?"
  } > "$out/$name.log"
  tail -n 3 "$out/$name.log"
  grep -q '^exit status: 0$' "$out/$name.log" || status=1
}

# gpu_gtest: the GoogleTest suite (JUnit XML beside the log); fails when a test
# fails, or when a GPU test skips on this GPU machine, except the tests of the
# no-GPU errors (GpuAbsent) and those that need more GPUs than it has.
gpu_gtest() {
  echo "$bin/gbf_tests --gtest_output=xml:$out/gtest.xml"
  "$bin/gbf_tests" --gtest_output="xml:$out/gtest.xml" || return
  LD_LIBRARY_PATH="$python_libs" python3 - "$out/gtest.xml" <<'PY'
import re, sys, xml.etree.ElementTree as ET
bad = [f"{case.get('classname')}.{case.get('name')}: {skip.get('message', '')}"
       for case in ET.parse(sys.argv[1]).iter("testcase") for skip in case.iter("skipped")
       if re.search("Gpu|DeviceRef", case.get("classname", "")) and case.get("classname") != "GpuAbsent"
       and not re.search(r"needs (two|\d+) GPUs", skip.get("message", ""))]
for line in bad:
    print("=== GPU test skipped on a GPU:", line.strip().replace("\n", " "))
sys.exit(1 if bad else 0)
PY
}

# suite: each CTest entry that needs no build tree, one line of verdict per entry;
# fails when any entry fails or a GPU GoogleTest skips.
suite() {
  local failed=0 entry rc
  item() {  # item NAME COMMAND...: 0 passed, 77 skipped (by design), else failed
    entry=$1
    shift
    echo "=== $entry: $*"
    "$@"
    rc=$?
    case $rc in
      0) echo "=== $entry: passed" ;;
      77) echo "=== $entry: skipped" ;;
      *) echo "=== $entry: FAILED (exit $rc)"; failed=$((failed + 1)) ;;
    esac
  }
  item gtest gpu_gtest
  item bench_analysis "$bin/gbf_bench_analysis_tests" --gtest_brief=1
  item example.join_probe "$bin/gbf_example_join_probe"
  item promises "$bin/gbf_promise_tests" --gtest_brief=1
  for script in test_cli test_scaling_cli test_counting test_cuckoo test_bench test_bench_counting \
                safety_concurrent_writers safety_read_errors safety_outputs safety_symlinks \
                safety_signals safety_small_items safety_crash; do
    item "cli.$script" tests/cli/$script.sh "$gbf"
  done
  item parquet.duckdb env LD_LIBRARY_PATH="$python_libs" python3 tests/parquet/check_duckdb.py "$gbf" --absent 1000
  item join.duckdb env LD_LIBRARY_PATH="$python_libs" tests/join/check_duckdb.sh "$gbf"
  echo "=== $failed failed"
  return "$failed"
}

case $stage in
  tests)
    install_wheels
    export PYTHONPATH=/tmp/gbf-site${PYTHONPATH:+:$PYTHONPATH}
    run tests suite ;;
  gtest)
    run gtest gpu_gtest ;;
  python)
    install_wheels
    run python env LD_LIBRARY_PATH="$python_libs" PYTHONPATH=/tmp/gbf-site GBF_CLI="$gbf" \
      python3 -m pytest -q -rs python/tests ;;
  sanitize)
    # GpuBackend.CudaErrorsNameTheCall makes an invalid cudaMemcpy on purpose (the
    # sanitizer would count its API error); every other CUDA error is a real one.
    filter='*Gpu*:DeviceRef*:-GpuBackend.CudaErrorsNameTheCall'
    # One tool after another: run at once (four processes, four contexts time-sliced
    # on one GPU) they were slower than in series on an H100. SANITIZE_TIMEOUT (s,
    # default none) bounds each, so a slow one leaves the others their turn.
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
      run "$tool" timeout "${SANITIZE_TIMEOUT:-0}" compute-sanitizer --tool "$tool" --error-exitcode 1 \
        "$bin/gbf_tests" --gtest_filter="$filter" --gtest_brief=1
    done ;;
  sweep)
    run sweep "$gbf" bench --full --repeat 3 --backends cpu,gpu-device,gpu-host \
      --json "$out/sweep.json" --plot "$out/sweep.png" ;;
  strings)
    run strings "$bin/gbf_bench_strings" --benchmark_format=json "--benchmark_out=$out/strings.json" ;;
  join)
    run join env OUT_TSV="$out/join.tsv" docs/join-prefilter/measure.sh "$gbf" --backend gpu ;;
  demo)
    run demo "$gbf" bench --json "$out/demo.json" --plot "$out/demo.png" ;;
  cpu)
    cores=$(nproc)
    counts=1
    for ((t = 2; t < cores; t *= 2)); do counts+=",$t"; done
    [ "$cores" -gt 1 ] && counts+=",$cores"
    run cpu "$bin/gbf_bench_cpu_peers" --cases l2,1e7,llc --repeat "${CPU_REPEAT:-5}" \
      --thread-counts "$counts" --scaling-batches 1e6,1e7 ;;
  *)
    echo "unknown stage '$stage' (tests, gtest, python, sanitize, sweep, strings, join, demo, cpu)" >&2
    exit 2 ;;
esac
exit $status
