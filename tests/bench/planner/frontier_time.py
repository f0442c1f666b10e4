#!/usr/bin/python3
"""frontier_time.py: `burstc plan --frontier` on the study's Inception-v3 cells.

    tests/bench/planner/frontier_time.py [BURSTC] [--runs N] [--gpus G,G...]
                                         [--baseline BURSTC0]

For Inception-v3 @ 32 with DeepPool's background jobs and A100 profile
(tests/bench/sim/jobs/study_inception_bg.burst, the cells of
tests/unit/planner/study_domination.py) on G GPUs (default 8 and 64), runs
`burstc plan --frontier --json FILE` N times (default 3) as whole processes
and prints the median and the range of the wall time and of the child's CPU
time (user + system, from wait4), with the load average before and after.
The exact frontier solves the DP once per vertex and once per pair of
adjacent vertices, so this is the planner's longest run in the tests. Run it
on a Release build (the default BURSTC is build/release/tools/burstc); a
benchmark, not a test.

--baseline BURSTC0 runs a second binary (say, a Release build of the commit
before a change) alternately with the first, under the same load, and adds
its medians and the ratios BURSTC0 / BURSTC; both must print the same rows
and write the same JSON, byte for byte (compared on every run).
"""
import os
import statistics
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, "..", "..", ".."))
args = sys.argv[1:]


def option(name, default):
    if name not in args:
        return default
    i = args.index(name)
    v = args[i + 1]
    del args[i:i + 2]
    return v


runs = int(option("--runs", "3"))
gpus = [int(g) for g in option("--gpus", "8,64").split(",")]
baseline = option("--baseline", None)
burstc = args[0] if args else os.path.join(root, "build", "release", "tools", "burstc")
job = os.path.join(root, "tests", "bench", "sim", "jobs", "study_inception_bg.burst")
profile = os.path.join(root, "data", "profiles", "deeppool-a100",
                       "inceptionLayerGpuProfileA100V2.txt")


def run_once(exe, g, d):
    out, js = os.path.join(d, "out"), os.path.join(d, "f.json")
    argv = [exe, "plan", "--frontier", "--json", js, "--gpus", str(g), "--batch", "32",
            "--profile", profile, job]
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    pid = os.posix_spawn(exe, argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, fd, 1)])
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    os.close(fd)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("failed: " + " ".join(argv))
    with open(out, "rb") as f, open(js, "rb") as h:
        return wall, ru.ru_utime + ru.ru_stime, f.read() + h.read()


def summary(res, i):
    v = [r[i] for r in res]
    return "%7.2f s (%.2f-%.2f)" % (statistics.median(v), min(v), max(v))


print("burstc plan --frontier, Inception-v3 @ 32 with background jobs: %d runs each, %s%s" %
      (runs, burstc, "" if baseline is None else " against the baseline " + baseline))
print("load average before: %.2f %.2f %.2f" % os.getloadavg())
with tempfile.TemporaryDirectory() as d:
    for g in gpus:
        new, old = [], []
        for _ in range(runs):
            new.append(run_once(burstc, g, d))
            if baseline:
                old.append(run_once(baseline, g, d))
                if old[-1][2] != new[-1][2]:
                    sys.exit("%d GPUs: the baseline's rows or JSON differ" % g)
        line = "%4d GPUs: wall %s  CPU %s" % (g, summary(new, 0), summary(new, 1))
        if baseline:
            line += "  | baseline wall %s  CPU %s  | ratio wall %.1fx  CPU %.1fx" % (
                summary(old, 0), summary(old, 1),
                statistics.median([r[0] for r in old]) / statistics.median([r[0] for r in new]),
                statistics.median([r[1] for r in old]) / statistics.median([r[1] for r in new]))
        print(line)
print("load average after: %.2f %.2f %.2f" % os.getloadavg())
