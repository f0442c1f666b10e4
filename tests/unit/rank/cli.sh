#!/bin/sh
# cli.sh: golden tests of the `burstc rank` command: exact stdout, stderr and status.
#
# usage: cli.sh BIN DIR [PREFIX...]
# For every DIR/NAME.cmd (one line of arguments, shell-quoted), runs
# "BIN PREFIX... ARGS" inside DIR and compares stdout with NAME.out, stderr with
# NAME.err and the exit status with NAME.status.  PREFIX is "rank": BIN is burstc.
# With RANK_CLI_UPDATE=1 it rewrites the expected files instead (review the diff!).
bin=$1
dir=$2
shift 2
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
fail=0
count=0
for cmd in "$dir"/*.cmd; do
  name=$(basename "$cmd" .cmd)
  args=$(cat "$cmd")
  (cd "$dir" && eval "exec \"\$bin\" \"\$@\" $args" >"$tmp/out" 2>"$tmp/err")
  echo $? >"$tmp/status"
  count=$((count + 1))
  if [ "${RANK_CLI_UPDATE:-0}" = 1 ]; then
    cp "$tmp/out" "$dir/$name.out"
    cp "$tmp/err" "$dir/$name.err"
    cp "$tmp/status" "$dir/$name.status"
    continue
  fi
  for part in out err status; do
    if ! diff -u "$dir/$name.$part" "$tmp/$part" >"$tmp/diff"; then
      echo "FAIL: $name ($part differs): $bin $* $args"
      cat "$tmp/diff"
      fail=$((fail + 1))
    fi
  done
done
if [ "$fail" -ne 0 ]; then
  echo "cli.sh: $fail mismatch(es) in $count cases"
  exit 1
fi
echo "cli.sh: $count cases ok"
