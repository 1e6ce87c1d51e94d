#!/bin/sh
# The Debian package: `cpack -G DEB` in the build directory makes gangrun_<version>_amd64.deb;
# unpacked into a fresh directory tree, its gangrun runs a job, its torchrun and msrun answer
# as themselves, its man pages and completion are there and parse, its units start the
# packaged binary and it depends on the libraries the binary links.
# Usage: check_deb.sh BUILD_DIR VERSION
set -eu
build=$1
version=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "check_deb: $*" >&2; exit 1; }

(cd "$build" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log" >&2; fail "cpack failed"; }
deb="$work/out/gangrun_${version}_amd64.deb"
[ -f "$deb" ] || fail "no $deb (made: $(ls "$work/out"))"
depends=$(dpkg-deb -f "$deb" Depends)
case "$depends" in *libc6*) ;; *) fail "Depends has no libc6: '$depends'" ;; esac
dpkg-deb -x "$deb" "$work/root"
root="$work/root"

[ "$("$root/usr/lib/gangrun/bin/torchrun" --version | cut -d' ' -f1-2)" = "torchrun $version" ] ||
  fail "torchrun --version"
[ "$("$root/usr/lib/gangrun/bin/msrun" --version | cut -d' ' -f1-2)" = "msrun $version" ] ||
  fail "msrun --version"
[ ! -e "$root/usr/bin/torchrun" ] || fail "torchrun must not be on PATH's /usr/bin"
cd "$work"
"$root/usr/bin/gangrun" --worker_num 2 --local_worker_num 2 /bin/sh -c 'echo "rank $RANK"' \
  >"$work/job.out" 2>"$work/job.err" || { cat "$work/job.err" >&2; fail "the job failed"; }
grep -q "rank 1" "$work/job.out" || fail "rank 1's output is missing: $(cat "$work/job.out")"
for page in gangrun msrun torchrun; do
  grep -q -- '\\-\\-worker_num\|\\-\\-nproc' "$root/usr/share/man/man1/$page.1" ||
    fail "$page.1 lists no options"
done
grep -q 'spare_nodes' "$root/usr/share/man/man1/gangrun.1" || fail "gangrun.1 lacks --spare_nodes"
bash -n "$root/usr/share/bash-completion/completions/gangrun" || fail "the completion does not parse"
grep -q '^ExecStart=/usr/bin/gangrun agent' "$root/usr/lib/systemd/system/gangrun-agent.service" ||
  fail "the agent unit does not start /usr/bin/gangrun"
echo "check_deb: $(basename "$deb") holds ($depends)"
