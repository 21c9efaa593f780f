# Sourced on the device machine by gpu_evidence.sh and gpu_bench.sh (from the
# repository root): unpacks the bundle scripts/device_prep.sh made into
# .device/{bin,lib} on first use, and puts the carried libraries on the loader's
# path. Python (python_libs) gets the carried libraries but not the carried C++
# runtime (.device/lib/cxx), which the binaries take: PyTorch there needs its own.
[ -d .device/bin ] || [ ! -f .device/bundle.tar.gz ] || tar -xzf .device/bundle.tar.gz -C .device || exit 1
python_libs="$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH="$PWD/.device/lib:$PWD/.device/lib/cxx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
