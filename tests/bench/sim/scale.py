#!/usr/bin/python3
"""Scale of the cluster simulator: `burstc sim` on 4,096 GPUs, measured the way
a user meets it (a whole, cold `burstc sim` process per run).

VGG-16 and ResNet-50 on 4,096 A100s (512 nodes of 8; the planner benchmarks'
cluster), global batch 1024 (and 4096, where dp uses every GPU), 20
iterations, dp and burst plans. Prints wall time (median of --runs), the
child's CPU time, peak RSS and the events the engine processed. Target
(issue 13): under 10 s and 2 GB at batch 1024.

    /usr/bin/python3 tests/bench/sim/scale.py [--burstc build/release/tools/burstc] [--runs 3]
"""
import argparse
import os
import re
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
JOBS = {
    "VGG-16": os.path.join(ROOT, "tests/bench/planner/jobs/vgg16_4096.burst"),
    "ResNet-50": os.path.join(HERE, "jobs/resnet50_4096.burst"),
}


def run_once(cmd):
    """Wall seconds, CPU seconds, peak RSS bytes and stdout of one process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = "", ""
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    out = p.stdout.read()
    err = p.stderr.read()
    p.stdout.close()
    p.stderr.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(cmd), err))
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", default=os.path.join(ROOT, "build/release/tools/burstc"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    a = ap.parse_args()
    print("burstc sim, 4096 A100s (512 nodes x 8), %d iterations; whole processes, median of %d"
          % (a.iterations, a.runs))
    print("load average at start: %s" % " ".join("%.2f" % x for x in os.getloadavg()))
    print("%-10s %6s %-9s %12s %10s %10s %10s %12s %12s" % ("model", "batch", "strategy", "iter ms",
                                                           "wall s", "CPU s", "peak MB", "events",
                                                           "events/s"))
    for model, job in JOBS.items():
        for batch in (1024, 4096):
            for strategy in ("dp", "burst"):
                cmd = [a.burstc, "sim", "--iterations", str(a.iterations), "--strategy", strategy,
                       "--batch", str(batch), job]
                runs = [run_once(cmd) for _ in range(a.runs)]
                wall = statistics.median(r[0] for r in runs)
                cpu = statistics.median(r[1] for r in runs)
                rss = max(r[2] for r in runs)
                out = runs[0][3]
                events = int(re.search(r"^(\d+) events", out, re.M).group(1))
                it = float(re.search(r"^simulated\s+([0-9.]+)", out, re.M).group(1))
                print("%-10s %6d %-9s %12.4f %10.2f %10.2f %10.1f %12d %12.0f"
                      % (model, batch, strategy, it, wall, cpu, rss / 2**20, events, events / cpu))
    print("load average at end: %s" % " ".join("%.2f" % x for x in os.getloadavg()))


if __name__ == "__main__":
    main()
