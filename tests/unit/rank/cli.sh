#!/bin/sh
# cli.sh: golden tests of the `burstc rank` command: exact stdout, stderr and status.
#
# usage: cli.sh BIN DIR [--doc FILE] [PREFIX...]
# For every DIR/NAME.cmd (one line of arguments, shell-quoted), runs
# "BIN PREFIX... ARGS" inside DIR and compares stdout with NAME.out, stderr with
# NAME.err and the exit status with NAME.status.  PREFIX is "rank": BIN is burstc.
# NAME.filter, when present, holds sed -E expressions applied to both streams first
# (for times and sizes that vary from run to run).  The stdout of a successful
# --json case must parse as JSON (strict UTF-8).
# With --doc, the examples of FILE marked `<!-- golden: NAME -->` must be those
# outputs too (doc_examples.py).
# With RANK_CLI_UPDATE=1 it rewrites the expected files (and the doc's examples)
# instead: review the diff!
bin=$1
dir=$2
shift 2
doc=
if [ "${1:-}" = --doc ]; then
  doc=$2
  shift 2
fi
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
  if [ -f "$dir/$name.filter" ]; then
    for part in out err; do
      sed -E -f "$dir/$name.filter" "$tmp/$part" >"$tmp/filtered" && mv "$tmp/filtered" "$tmp/$part"
    done
  fi
  case " $args " in
  *" --json "*)
    if [ "$(cat "$tmp/status")" = 0 ] && ! /usr/bin/python3 -c '
import json, sys
json.loads(sys.stdin.buffer.read().decode("utf-8", errors="strict"))' <"$tmp/out"; then
      echo "FAIL: $name (stdout is not valid JSON): $bin $* $args"
      fail=$((fail + 1))
    fi
    ;;
  esac
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
if [ -n "$doc" ]; then
  if [ "${RANK_CLI_UPDATE:-0}" = 1 ]; then
    /usr/bin/python3 "$(dirname "$0")/doc_examples.py" "$doc" "$dir" --update || fail=$((fail + 1))
  elif ! /usr/bin/python3 "$(dirname "$0")/doc_examples.py" "$doc" "$dir"; then
    fail=$((fail + 1))
  fi
fi
if [ "$fail" -ne 0 ]; then
  echo "cli.sh: $fail mismatch(es) in $count cases"
  exit 1
fi
echo "cli.sh: $count cases ok"
