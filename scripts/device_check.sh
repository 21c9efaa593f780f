# Sourced on the device machine by gpu_evidence.sh and gpu_bench.sh (from the
# repository root, with $commit set to the sha the caller will write in its log
# headers). Device minutes are scarce, so a run that could only produce evidence
# under a wrong name stops here, before anything is measured:
#   - .device was not carried (no bundle, no binaries);
#   - $commit is not a full 40-hex sha, or not the one scripts/device_prep.sh
#     recorded in .device/COMMIT (the binaries' source), or that prep was made
#     from a tree with uncommitted changes ("-dirty");
#   - nvidia-smi does not answer (no GPU: nothing here would be GPU evidence).
# GBF_ALLOW_COMMIT_MISMATCH=1 lets a deliberate exception through, and says so in
# the output. Sets $device and $driver for the headers.
if [ ! -f .device/bundle.tar.gz ] && [ ! -d .device/bin ]; then
  echo "device_check: no .device here: run scripts/device_prep.sh on the development machine and carry .device" >&2
  exit 2
fi
if ! [[ $commit =~ ^[0-9a-f]{40}$ ]]; then
  echo "device_check: '$commit' is not a full commit sha (40 hex digits); pass the sha of the code that was built" >&2
  exit 2
fi
built=$(cat .device/COMMIT 2>/dev/null || echo "unknown (a prep older than .device/COMMIT)")
if [ "$built" != "$commit" ]; then
  if [ "${GBF_ALLOW_COMMIT_MISMATCH:-0}" = 1 ]; then
    echo "device_check: warning: .device was built from $built, the headers will say $commit" >&2
  else
    echo "device_check: .device was built from $built, not $commit: run scripts/device_prep.sh again on a clean tree at $commit (GBF_ALLOW_COMMIT_MISMATCH=1 to go on anyway)" >&2
    exit 2
  fi
fi
if ! query=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n 1) ||
    [[ $query != *,* ]]; then
  echo "device_check: nvidia-smi gave no GPU ('$query'): this is not a GPU machine" >&2
  exit 2
fi
device=${query%,*}
driver=${query##*, }
