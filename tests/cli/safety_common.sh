# Shared by the tests/cli/safety_*.sh scripts (issue 22: the command line
# never loses a user's data). Source it with the gbf binary as $1: it makes a
# scratch directory, cds there and defines the checks. Needs bash and python3.
source "$(dirname "${BASH_SOURCE[0]}")/cli_common.sh" "$1"

# expect_rc RC CMD...: runs CMD (stdout -> out, stderr -> err), checks its exit code.
expect_rc() {
  local want=$1; shift
  "$@" >out 2>err
  local got=$?
  [[ $got == "$want" ]] || fail "exit $got (want $want): $* -- stderr: $(cat err)"
}
expect_err() { grep -q -- "$1" err || fail "stderr lacks '$1': $(cat err)"; }
expect_out() { [[ "$(cat out)" == "$1" ]] || fail "stdout is '$(cat out)', want '$1'"; }

# u64_keys FILE FIRST COUNT: raw little-endian uint64 keys FIRST .. FIRST+COUNT-1.
u64_keys() {
  python3 -c "import struct,sys; f,a,n=sys.argv[1],int(sys.argv[2]),int(sys.argv[3]); open(f,'wb').write(struct.pack('<%dQ' % n, *range(a, a + n)))" "$@"
}

# count_present FILTER KEYS: how many keys of KEYS the filter may hold.
count_present() { "$GBF" query "$1" "$2" --count -q --backend cpu; }

# leftovers: gbf's temporary and lock files in the current directory, one per line.
leftovers() { ls -A | grep -E '\.tmp\.[0-9]+\.[0-9]+$|\.gbf-lock$'; }

# True when this directory's file system has O_TMPFILE (unnamed temporaries).
has_tmpfile() {
  python3 -c "import os; os.close(os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o600))" 2>/dev/null
}

finish() {
  if (( failures > 0 )); then
    echo "$failures failure(s)"
    exit 1
  fi
  echo "all checks passed"
  exit 0
}
