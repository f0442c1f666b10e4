#!/usr/bin/env python3
"""Helpers of scripts/gpu-check, kept out of the shell script so each is a plain
process that `timeout` can run:

  compare REF OUT TOL     every "step S loss L" line of REF must appear in OUT with a
                          loss within TOL relative; prints both columns
  timed OUT CMD...        runs CMD, writing its stdout lines to OUT prefixed with a
                          monotonic time stamp; exits with CMD's status
  rate OUT BATCH [FIRST]  samples/s between step FIRST (default 5) and the last step
                          of a `timed` output, from the step lines' time stamps
  interleave IR SLICES    prints the planned IR with an interleave section: the one the
                          interleave pass wrote, or (before the pass exists) one copy of
                          the first background job on rank 0, its step cut into SLICES
                          slices of about equal unit counts
"""
import re
import subprocess
import sys
import time

STEP = re.compile(r"^step (\d+) loss (\S+)$", re.M)


def compare(ref, out, tol):
    want = {int(s): float(v) for s, v in STEP.findall(open(ref).read())}
    got = {int(s): float(v) for s, v in STEP.findall(open(out).read())}
    bad = 0
    for s in sorted(want):
        if s not in got:
            print("  step %2d  missing from %s" % (s, out))
            bad += 1
            continue
        rel = abs(got[s] - want[s]) / max(abs(want[s]), 1e-12)
        over = rel > float(tol) or rel != rel
        bad += over
        print("  step %2d  cpu %.9g  gpu %.9g  rel %.1e%s"
              % (s, want[s], got[s], rel, "   <-- over %s" % tol if over else ""))
    return 1 if bad or not want else 0


def timed(out, cmd):
    with open(out, "w") as f:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        for line in p.stdout:
            f.write("%.6f %s" % (time.monotonic(), line))
            f.flush()
        return p.wait()


def interleave(ir, slices):
    text = open(ir).read()
    section = re.search(r"^interleave .*?^\}\n", text, re.M | re.S)
    if section and re.search(r"^  copy ", section.group(0), re.M):
        sys.stdout.write(text)
        return 0
    # The pass placed no copy: on one GPU its model sees no idle window (the
    # foreground runs back to back), while the GPU has idle SMs between and under
    # kernels. The check measures that sharing, so it places one copy on rank 0
    # itself, replacing the pass's section of refusals.
    if section:
        text = text[:section.start()] + text[section.end():]
    job = re.search(r"^job (\S+) \{.*background = \[(\S+) @", text, re.M)
    graph = re.search(r"^graph %s \{\n(.*?)^\}" % re.escape(job.group(2)), text, re.M | re.S)
    n = len(re.findall(r"^  %", graph.group(1), re.M))
    units, k = 2 * n + 1, max(1, min(int(slices), 2 * n + 1))
    cut = sorted({round(i * units / k) for i in range(k + 1)})
    sys.stdout.write(text + "interleave %s {\n  slice_bound = 0.0005, fg_time = 1, fg_time_bg = 1\n"
                     "  copy 0 @ 0 {seed = 1, steps_per_iter = 0.1, cut = [%s]}\n}\n"
                     % (job.group(1), ", ".join(map(str, cut))))
    return 0


def rate(out, batch, first=5):
    t = {}
    for line in open(out):
        ts, _, rest = line.partition(" ")
        m = STEP.match(rest.rstrip("\n"))
        if m:
            t[int(m.group(1))] = float(ts)
    last = max(t) if t else -1
    if last <= first or first not in t:
        print("n/a")
        return 1
    print("%.1f" % ((last - first) * int(batch) / (t[last] - t[first])))
    return 0


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "compare":
        sys.exit(compare(*args))
    if cmd == "timed":
        sys.exit(timed(args[0], args[1:]))
    if cmd == "rate":
        sys.exit(rate(args[0], args[1], *(int(a) for a in args[2:])))
    if cmd == "interleave":
        sys.exit(interleave(*args))
    sys.exit("usage: gpucheck_util.py compare|timed|rate|interleave ...")
