#!/usr/bin/python3
"""cold_start.py: `burstc plan` as whole processes, the way a user runs it.

    tests/bench/planner/cold_start.py [BURSTC] [--runs N]

For VGG-16 and GPT-2 XL on 4096 A100s at global batch 1024 (the jobs in
tests/bench/planner/jobs/), runs `burstc plan --strategy S JOB` N times (default
10) for S in dp, deeppool, burst and for the default command (all three
strategies planned, burst's table printed), and prints the median and the
range of the wall time and of the child's CPU time (user + system, from
wait4), with the load average before and after. Output goes to /dev/null.
Run it on a quiet machine (and on a Release build: the default BURSTC is
build/rel/tools/burstc); a benchmark, not a test.
"""
import os
import statistics
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


print("burstc plan as a whole process: %d runs each, %s" % (runs, burstc))
print("load average before: %.2f %.2f %.2f" % os.getloadavg())
print("%-9s %-9s %10s %16s %10s %16s %9s %7s" %
      ("model", "strategy", "wall ms", "(min..max)", "cpu ms", "(min..max)", "minflt", "target"))
for name, job, target in jobs:
    path = os.path.join(here, "jobs", job)
    for strat in ["dp", "deeppool", "burst", "default"]:
        argv = [burstc, "plan"] + ([] if strat == "default" else ["--strategy", strat]) + [path]
        run_once(argv)  # warm the page cache, not the process
        res = [run_once(argv) for _ in range(runs)]
        wall = [1e3 * r[0] for r in res]
        cpu = [1e3 * r[1] for r in res]
        flt = statistics.median([r[2] for r in res])
        print("%-9s %-9s %10.2f %7.2f..%-7.2f %10.2f %7.2f..%-7.2f %9d %5.0f ms" %
              (name, strat, statistics.median(wall), min(wall), max(wall),
               statistics.median(cpu), min(cpu), max(cpu), flt, target))
print("load average after: %.2f %.2f %.2f" % os.getloadavg())
