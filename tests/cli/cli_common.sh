# Shared by the tests/cli/*.sh scripts. Source it with the gbf binary as $1:
# it makes a scratch directory (removed on exit), cds there, and defines
# fail(), which counts failures in $failures; CLI_TESTS is this folder.
set -u
GBF=$1
CLI_TESTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
