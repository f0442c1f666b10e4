#!/usr/bin/python3
"""Hostile block and loop expansion: time and memory of a whole cold `burstc`.

Issue 31: any input of at most 1 MiB must end in under 2 s and 256 MB, with
an error that names what passed the limits. Each case is generated here, run
as `burstc FILE -o OUT.ir` (the command a user runs) R times, and the table
shows the median wall time, the largest peak RSS (wait4's of the child, so
the binary's own pages count too), the exit status and the first line of the
message. The baseline in the same run is a two-op model: its time and memory
are what any run of this burstc costs. Cases at the limits (a model that
just fits: 65,536 ops from doubling blocks, 786,430 statements, 990,000
terms) show the cost of the largest legal inputs; the others pass a limit
by far and must fail fast.

    /usr/bin/python3 tests/bench/frontend/hostile_expansion.py [--burstc build/release/tools/burstc] [--runs 5]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

MODEL = "model m {\n  input x: f32[batch, 4]\n  y = %s\n}\n"


def doubling(levels, base="relu(in)", lets=0):
    pad = " ".join("let l%d = %d" % (i, i) for i in range(lets))
    return ("block b0() { return %s }\n" % base +
            "".join("block b%d() { %s h = b%d(in) return b%d(h) }\n" % (k, pad, k - 1, k - 1)
                    for k in range(1, levels + 1)) + MODEL % ("b%d(x)" % levels))


def tripling(levels):
    return ("block t0() { return relu(in) }\n" +
            "".join("block t%d() { a = t%d(in) b = t%d(a) return t%d(b) }\n" % (k, k - 1, k - 1, k - 1)
                    for k in range(1, levels + 1)) + MODEL % ("t%d(x)" % levels))


def mutual(levels):
    return ("block a0(n) { return relu(in) }\nblock b0(n) { return relu(in) }\n" +
            "".join("block a%d(n) { h = in for i in 0..n { h = b%d(h, n = n) } return h }\n"
                    "block b%d(n) { h = a%d(in, n = n) return a%d(h, n = n + 1) }\n"
                    % (k, k - 1, k, k - 1, k - 1) for k in range(1, levels + 1)) +
            MODEL % ("a%d(x, n = 2)" % levels))


def nested_defs(levels):
    def nest(k):
        if k == 0:
            return "block n0() { return relu(in) }\n"
        return "block n%d() {\n%s h = n%d(in)\n return n%d(h)\n}\n" % (k, nest(k - 1), k - 1, k - 1)
    return nest(levels) + MODEL % ("n%d(x)" % levels)


def big_let(items, calls):
    return ("block b() {\n  let l = [" + ", ".join(["1"] * items) + "]\n  return relu(in)\n}\n"
            "model m {\n  input x: f32[batch, 4]\n  h = x\n  for i in 0..%d { h = b(h) }\n}\n" % calls)


def loop_let(items, iters):
    return ("model m {\n  input x: f32[batch, 4]\n  h = x\n  for i in 0..%d {\n    let l = [" % iters +
            ", ".join(["1"] * items) + "]\n    h = relu(h)\n  }\n}\n")


def deep_loops(depth):
    return ("model m {\n  input x: f32[batch, 4]\n  h = relu(x)\n" +
            "".join("for i%d in 0..2 {\n" % k for k in range(depth)) + "}\n" * depth + "}\n")


def chain(n):
    return ("model m {\n  input x: f32[batch, 4]\n  h0 = relu(x)\n" +
            "".join("  h%d = relu(h%d)\n" % (i, i - 1) for i in range(1, n)) + "}\n")


CASES = [
    ("baseline: 2 ops", MODEL % "relu(x)"),
    ("doubling, 30 levels (2^30 ops)", doubling(30)),
    ("doubling, 30 levels, no ops", doubling(30, "in")),
    ("tripling, 40 levels (overflow)", tripling(40)),
    ("mutual a/b with loops, 30 levels", mutual(30)),
    ("nested definitions, 20 levels", nested_defs(20)),
    ("50,000-item let x 20,000 calls", big_let(50000, 20000)),
    ("340,000-item let x 4 calls (1 MiB)", big_let(340000, 4)),
    ("loop of 20,000 lets of 50,000", loop_let(50000, 20000)),
    ("loops 30 deep of 2", deep_loops(30)),
    ("fits: doubling 16 (65,536 ops)", doubling(16)),
    ("fits: no-op doubling 18 (786,430 stmts)", doubling(18, "in")),
    ("fits: 198 lets of 5,000 in a loop", loop_let(5000, 198)),
    ("fits: doubling 16, 4 lets a block", doubling(16, "relu(in)", 4)),
    ("fits: 45,000-op chain (1 MiB)", chain(45000)),
]


def run_once(burstc, path, out):
    """One cold run: wall seconds, peak RSS in KiB (this child's own, from
    wait4), exit status (or 'kill' past 120 s), standard error."""
    t0 = time.monotonic()
    p = subprocess.Popen([burstc, path, "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    timer = threading.Timer(120, p.kill)
    timer.start()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    timer.cancel()
    wall = time.monotonic() - t0
    rc = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_maxrss, ("kill" if rc == -9 else rc), err.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--burstc", default="build/test/tools/burstc")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for name, text in CASES:
            path = os.path.join(tmp, "case.burst")
            with open(path, "w") as f:
                f.write(text)
            walls, rss, rc, first = [], 0, None, ""
            for _ in range(args.runs):
                wall, peak, rc, err = run_once(args.burstc, path, os.path.join(tmp, "out.ir"))
                walls.append(wall)
                rss = max(rss, peak)
                first = err.split("\n")[0]
            rows.append((name, len(text), statistics.median(walls), rss / 1024, rc, first))
        print("load: " + open("/proc/loadavg").read().strip() + "; burstc: " + args.burstc)
        print("%-40s %9s %9s %9s %4s  %s" % ("case", "bytes", "median s", "peak MB", "exit", "message"))
        base = rows[0][2]
        for name, size, wall, mb, rc, first in rows:
            msg = first.split(": error: ")[-1] if ": error: " in first else first
            print("%-40s %9d %9.3f %9.1f %4s  %s" % (name, size, wall, mb, rc, msg[:110]))
        print("(baseline median %.3f s; worst case %.3f s, %.1f MB)"
              % (base, max(r[2] for r in rows), max(r[3] for r in rows)))


if __name__ == "__main__":
    main()
