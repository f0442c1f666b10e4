#!/usr/bin/python3
"""cold_start.py: `burstc plan` as whole processes, the way a user runs it.

    tests/bench/planner/cold_start.py [BURSTC] [--runs N] [--baseline BURSTC0]

For VGG-16 and GPT-2 XL on 4096 A100s at global batch 1024 (the jobs in
tests/bench/planner/jobs/), runs `burstc plan --strategy S JOB` N times (default
10) for S in dp, deeppool, burst and for the default command (all three
strategies planned, burst's table printed), and prints the median and the
range of the wall time and of the child's CPU time (user + system, from
wait4), with the load average before and after. Output goes to /dev/null.
Run it on a quiet machine (and on a Release build: the default BURSTC is
build/rel/tools/burstc); a benchmark, not a test.

--baseline BURSTC0 runs a second binary (say, a Release build of the commit
before a change) alternately with the first, in the same run and under the
same load, and adds its medians and the ratios BURSTC0 / BURSTC of the wall
and CPU medians; both must print the same plan (their outputs are compared).
"""
import os
import statistics
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, "..", "..", ".."))
args = sys.argv[1:]
runs = 10
if "--runs" in args:
    i = args.index("--runs")
    runs = int(args[i + 1])
    del args[i:i + 2]
baseline = None
if "--baseline" in args:
    i = args.index("--baseline")
    baseline = args[i + 1]
    del args[i:i + 2]
burstc = args[0] if args else os.path.join(root, "build", "rel", "tools", "burstc")
jobs = [("VGG-16", "vgg16_4096.burst", 15.0), ("GPT-2 XL", "gpt2_xl_4096.burst", 150.0)]
devnull = os.open(os.devnull, os.O_WRONLY)


def run_once(argv):
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ,
                         file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1)])
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("failed: " + " ".join(argv))
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_minflt


def med(res, i, scale=1e3):
    return statistics.median([scale * r[i] for r in res])


print("burstc plan as a whole process: %d runs each, %s%s" %
      (runs, burstc, "" if baseline is None else " against the baseline " + baseline))
print("load average before: %.2f %.2f %.2f" % os.getloadavg())
head = "%-9s %-9s %10s %16s %10s %16s %9s %7s" % (
    "model", "strategy", "wall ms", "(min..max)", "cpu ms", "(min..max)", "minflt", "target")
if baseline:
    head += " %11s %10s %9s %8s" % ("base wall", "base cpu", "wall x", "cpu x")
print(head)
for name, job, target in jobs:
    path = os.path.join(here, "jobs", job)
    for strat in ["dp", "deeppool", "burst", "default"]:
        opts = ([] if strat == "default" else ["--strategy", strat]) + [path]
        argv = [burstc, "plan"] + opts
        run_once(argv)  # warm the page cache, not the process
        res, base = [], []
        if baseline:
            bargv = [baseline, "plan"] + opts
            run_once(bargv)
            outs = [subprocess.run(a, capture_output=True).stdout for a in (argv, bargv)]
            if outs[0] != outs[1]:
                sys.exit("%s %s: the baseline prints another plan" % (name, strat))
        for _ in range(runs):  # alternately, so both see the same load
            res.append(run_once(argv))
            if baseline:
                base.append(run_once(bargv))
        wall = [1e3 * r[0] for r in res]
        cpu = [1e3 * r[1] for r in res]
        flt = statistics.median([r[2] for r in res])
        line = "%-9s %-9s %10.2f %7.2f..%-7.2f %10.2f %7.2f..%-7.2f %9d %5.0f ms" % (
            name, strat, statistics.median(wall), min(wall), max(wall),
            statistics.median(cpu), min(cpu), max(cpu), flt, target)
        if baseline:
            line += " %11.2f %10.2f %8.2fx %7.2fx" % (
                med(base, 0), med(base, 1), med(base, 0) / med(res, 0), med(base, 1) / med(res, 1))
        print(line)
print("load average after: %.2f %.2f %.2f" % os.getloadavg())
