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
# COMMIT must be the full sha that device_prep.sh recorded in .device/COMMIT (the
# binaries' source): another sha, or a prep from a tree with uncommitted changes,
# is refused, so a log never names code other than what ran.
# Every item runs under a time limit (ITEM_TIMEOUT s, default 300; the sanitizer
# tools SANITIZE_TIMEOUT, default 140 each; sweep 560), so a stall ends with an
# "exit status" line and the later items still run.
#
# Stages (rough device minutes on an H100/H200):
#   tests      what CTest runs, from the carried binaries (the CPU-only loader fuzz
#              driver aside): the GoogleTest suites (GPU tests included: none may
#              skip), the promise tests, the user-kernel example, the CLI scripts
#              (whose automatic backend is the GPU there) and the DuckDB
#              cross-checks of gbf parquet / gbf join                                ~3
#   gtest      the GoogleTest suite alone (the first item of tests, same checks)    ~1
#   python     the Python package's pytest suite (CuPy, PyTorch, pyarrow device
#              tests included) against the carried wheel, then `python -m gbf bench`
#              on the GPU (Python against C++ per call)                               ~3
#   sanitize   compute-sanitizer memcheck, racecheck, synccheck and initcheck on
#              the GPU tests (SANITIZE_TOOLS picks a subset)                          ~6
#   sweep      gbf bench --full without cpu1 (JSON, and a gnuplot script: the
#              image has no gnuplot; `cd OUT_DIR && gnuplot sweep.gp` draws it here)   ~8
#   strings    gbf_bench_strings (URL / id / long-tail mixes vs the bound)           ~3
#   join       gbf join on the GPU: SF 1 and 10 x selectivity 1/5/25/100 %           ~4
#   cuckoo     gbf_bench_cuckoo 1 64: the cuckoo filter beside Bloom filters on one
#              CPU thread and the GPU, with the GPU's deterministic placement at 80
#              and 95 % load (its tail is one thread: what does it cost?)            ~2
#   demo       scripts/demo.sh's command: gbf bench with the defaults                ~1
#   cpu        gbf_bench_cpu_peers on the device machine's CPU (no GPU): thread scaling
#              of add and contains at T = 1, 2, 4, ... up to its cores, gbf against
#              SimdBlockFilter per core (when prepared with GBF_FASTFILTER_DIR), the
#              cost of a call; CPU_REPEAT (default 5) repeats per cell               ~6
# The kernel benchmarks (gbf_bench_gpu) have their own script, scripts/gpu_bench.sh.
set -uo pipefail
invocation=$(printf '%q ' "$0" "$@")
cd "$(dirname "$0")/.."
stage=${1:?usage: scripts/gpu_evidence.sh STAGE OUT_DIR COMMIT} out=${2:?output directory} commit=${3:?commit sha of the code that was built}
source scripts/device_check.sh  # refuses a missing .device, a commit other than its build's, no GPU
mkdir -p "$out"
out=$(cd "$out" && pwd)
source scripts/device_env.sh  # .device/{bin,lib}, LD_LIBRARY_PATH, python_libs
bin=$PWD/.device/bin
gbf=$bin/gbf
status=0
item_timeout=${ITEM_TIMEOUT:-300}

# The carried wheels (gbf, duckdb) go into one scratch site-packages ahead of the
# image's, afresh each call (a warm machine may hold an older prep's), with what
# pip said kept in OUT_DIR/wheels.log; a failure fails the stage.
install_wheels() {
  rm -rf /tmp/gbf-site
  if ! python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --target /tmp/gbf-site \
      .device/wheels/*.whl > "$out/wheels.log" 2>&1; then
    echo "error: the carried wheels did not install (see $out/wheels.log)" >&2
    status=1
  fi
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
      echo "command: $invocation(the commands follow)"
    else
      echo "command: $(printf '%q ' "$@")"
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
  echo "timeout $item_timeout $bin/gbf_tests --gtest_output=xml:$out/gtest.xml"
  timeout --kill-after=10 "$item_timeout" "$bin/gbf_tests" --gtest_output="xml:$out/gtest.xml" || return
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
  # item NAME COMMAND...: 0 passed, 77 skipped (by design), 124/137 timed out,
  # else failed. Commands (not this script's functions) run under the time limit.
  item() {
    entry=$1
    shift
    echo "=== $entry: $*"
    if declare -F "$1" >/dev/null; then "$@"; else timeout --kill-after=10 "$item_timeout" "$@"; fi
    rc=$?
    case $rc in
      0) echo "=== $entry: passed" ;;
      77) echo "=== $entry: skipped" ;;
      124 | 137) echo "=== $entry: FAILED (timed out after ${item_timeout} s)"; failed=$((failed + 1)) ;;
      *) echo "=== $entry: FAILED (exit $rc)"; failed=$((failed + 1)) ;;
    esac
  }
  # The DuckDB checks skip (77) when duckdb cannot be imported; here its wheel is
  # carried, so a skip means the install failed: counted as a failure.
  required() {
    item "$@"
    if [ "$rc" -eq 77 ]; then
      echo "=== $entry: FAILED (skipped, but duckdb was carried)"
      failed=$((failed + 1))
    fi
  }
  item gtest gpu_gtest
  item bench_analysis "$bin/gbf_bench_analysis_tests" --gtest_brief=1
  item example.join_probe "$bin/gbf_example_join_probe"
  item promises "$bin/gbf_promise_tests" --gtest_brief=1
  for script in test_cli test_scaling_cli test_cli_contracts test_counting test_cuckoo test_bench test_bench_counting \
                safety_concurrent_writers safety_read_errors safety_outputs safety_symlinks \
                safety_signals safety_small_items safety_crash; do
    item "cli.$script" tests/cli/$script.sh "$gbf"
  done
  required parquet.duckdb env LD_LIBRARY_PATH="$python_libs" python3 tests/parquet/check_duckdb.py "$gbf" --absent 1000
  required join.duckdb env LD_LIBRARY_PATH="$python_libs" tests/join/check_duckdb.sh "$gbf"
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
    run python timeout --kill-after=10 "${PYTHON_TIMEOUT:-560}" env LD_LIBRARY_PATH="$python_libs" \
      PYTHONPATH=/tmp/gbf-site GBF_CLI="$gbf" python3 -m pytest -q -rs python/tests
    # Python against C++ per call on the GPU (the result's allocation included).
    run python_bench timeout --kill-after=10 120 env LD_LIBRARY_PATH="$python_libs" PYTHONPATH=/tmp/gbf-site \
      python3 -m gbf bench --backends gpu-device,gpu-host --batches 1e3,1e5,1e7 --filter-mib 64 \
      --min-seconds 0.1 --json "$out/python-bench.json" ;;
  sanitize)
    # GpuBackend.CudaErrorsNameTheCall makes an invalid cudaMemcpy on purpose (the
    # sanitizer would count its API error); every other CUDA error is a real one.
    filter='*Gpu*:DeviceRef*:-GpuBackend.CudaErrorsNameTheCall'
    # One tool after another: run at once (four processes, four contexts time-sliced
    # on one GPU) they were slower than in series on an H100. SANITIZE_TIMEOUT (s,
    # default 140, 0 = none) bounds each, so a slow one leaves the others their
    # turn and four fit one device call; a tool that ran out logs exit status 124.
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
      run "$tool" timeout --kill-after=10 "${SANITIZE_TIMEOUT:-140}" compute-sanitizer --tool "$tool" --error-exitcode 1 \
        "$bin/gbf_tests" --gtest_filter="$filter" --gtest_brief=1
    done ;;
  sweep)
    # Run from OUT_DIR, so that the gnuplot script names its PNG relatively.
    run sweep timeout --kill-after=10 560 env -C "$out" "$gbf" bench --full --repeat 3 \
      --backends cpu,gpu-device,gpu-host --json sweep.json --plot sweep.png ;;
  strings)
    run strings timeout --kill-after=10 560 "$bin/gbf_bench_strings" "--benchmark_out=$out/strings.json" \
      --benchmark_out_format=json ;;
  join)
    run join timeout --kill-after=10 560 env OUT_TSV="$out/join.tsv" docs/join-prefilter/measure.sh \
      "$gbf" --backend gpu ;;
  cuckoo)
    run cuckoo timeout --kill-after=10 560 "$bin/gbf_bench_cuckoo" 1 64 ;;
  demo)
    run demo timeout --kill-after=10 560 env -C "$out" "$gbf" bench --json demo.json --plot demo.png ;;
  cpu)
    cores=$(nproc)
    counts=1
    for ((t = 2; t < cores; t *= 2)); do counts+=",$t"; done
    [ "$cores" -gt 1 ] && counts+=",$cores"
    run cpu timeout --kill-after=10 560 "$bin/gbf_bench_cpu_peers" --cases l2,1e7,llc --repeat "${CPU_REPEAT:-5}" \
      --thread-counts "$counts" --scaling-batches 1e6,1e7 ;;
  *)
    echo "unknown stage '$stage' (tests, gtest, python, sanitize, sweep, strings, join, cuckoo, demo, cpu)" >&2
    exit 2 ;;
esac
exit $status
