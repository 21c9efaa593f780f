#!/usr/bin/env bash
# Makes the Python package's source distribution, one that builds anywhere:
# python/ alone holds only the binding, whose CMake builds the library from the
# repository around it (add_subdirectory(..)), which an unpacked sdist lacks.
# So the library's sources (what its CMakeLists.txt needs when it is not the
# top-level project: CMakeLists.txt, cmake/, include/, host/, kernels/) go into
# the sdist as python/gbf_library/, where python/CMakeLists.txt looks first.
# Files are the ones git tracks, as they are in the working tree.
#
#   usage: scripts/python_sdist.sh [OUT_DIR]     (default: dist/; prints the sdist's path)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
copy() {  # copy PATH... DEST: the git-tracked files under PATH, kept relative
  local dest=${*: -1}
  git ls-files -z -- "${@:1:$#-1}" | xargs -0 -r cp --parents -t "$dest"
}
mkdir -p "$stage/python"
(cd python && copy . "$stage/python")
mkdir -p "$stage/python/gbf_library"
copy CMakeLists.txt cmake include host kernels "$stage/python/gbf_library"
cd "$stage/python"
python3 - "$out" <<'PY'
import sys
from scikit_build_core.build import build_sdist
print(sys.argv[1] + "/" + build_sdist(sys.argv[1]))
PY
