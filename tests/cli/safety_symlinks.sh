#!/usr/bin/env bash
# Issue 22, item 4: a symbolic link given as an output is followed: the file it
# points to is replaced (atomically, in its own directory) and the link stays.
# Usage: safety_symlinks.sh path/to/gbf
source "$(dirname "$0")/safety_common.sh"

u64_keys k.u64 0 1000
mkdir -p real sub
expect_rc 0 "$GBF" create --capacity 1000 -o real/f.gbf -q
ln -s real/f.gbf rel.gbf            # relative
ln -s "$WORK/real/f.gbf" abs.gbf    # absolute
ln -s rel.gbf chain.gbf             # a link to a link
ln -s ../real/f.gbf sub/up.gbf      # relative to the link's own directory

is_link_to() { [[ -L $1 && $(readlink "$1") == "$2" ]] || fail "$1 is no longer a link to $2"; }
links_intact() {
  is_link_to rel.gbf real/f.gbf
  is_link_to abs.gbf "$WORK/real/f.gbf"
  is_link_to chain.gbf rel.gbf
  is_link_to sub/up.gbf ../real/f.gbf
}

# add through each kind of link: the real filter gets the keys, the links stay.
first=0
for link in rel.gbf abs.gbf chain.gbf sub/up.gbf; do
  u64_keys part.u64 $first 200
  expect_rc 0 "$GBF" add "$link" part.u64 -q
  [[ $(count_present real/f.gbf part.u64) == 200 ]] || fail "add $link: the real filter lacks the keys"
  first=$((first + 200))
  links_intact
done
[[ $(ls -A real) == f.gbf ]] || fail "files left beside the real filter: $(ls -A real)"

# Outputs of create, build, merge and query --out through links.
expect_rc 0 "$GBF" create --capacity 10 -o other.gbf -q
ln -s real/out.gbf dangling.gbf
expect_rc 0 "$GBF" build k.u64 -o dangling.gbf -q
[[ -f real/out.gbf ]] || fail "build through a dangling link did not create the file it names"
is_link_to dangling.gbf real/out.gbf
[[ $(count_present dangling.gbf k.u64) == 1000 ]] || fail "build through a link: keys missing"
ln -s real/m.gbf mlink.gbf
expect_rc 0 "$GBF" merge real/f.gbf real/out.gbf -o mlink.gbf -q
is_link_to mlink.gbf real/m.gbf
[[ $(count_present real/m.gbf k.u64) == 1000 ]] || fail "merge through a link: keys missing"
ln -s real/r.bytes rlink
expect_rc 0 "$GBF" query real/out.gbf k.u64 --out rlink -q
is_link_to rlink real/r.bytes
[[ $(stat -c %s real/r.bytes) == 1000 ]] || fail "query --out through a link: results not in the target"
# The Parquet export follows links the same way.
ln -s real/p.sbbf plink
expect_rc 0 "$GBF" build k.u64 --parquet-compatible --format parquet-sbbf -o plink -q
is_link_to plink real/p.sbbf
[[ $(stat -c %s real/p.sbbf) == 2064 ]] || fail "parquet export through a link"

# A loop of links is an error, not a file written in place of a link.
ln -s loop2.gbf loop1.gbf
ln -s loop1.gbf loop2.gbf
expect_rc 1 "$GBF" create --capacity 10 -o loop1.gbf
expect_err "loop1.gbf': more than 40 symbolic links"
is_link_to loop1.gbf loop2.gbf
links_intact
[[ -z $(leftovers) ]] || fail "files left behind: $(leftovers)"
[[ -z $(cd real && leftovers) ]] || fail "files left behind in real/: $(cd real && leftovers)"
finish
