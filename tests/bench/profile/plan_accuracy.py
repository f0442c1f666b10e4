#!/usr/bin/python3
"""How well the planner predicts a real run with a profile `burstc profile` measured here.

For each CPU job (the Fashion-MNIST CNN and the small residual network) and each
rank count G, measures its profile on this machine with `burstc profile
--concurrent G` (one rank = one core, one thread pinned; G copies at once, as G
ranks share the machine), then for each rank count G (--gpus, default 1 and 2: this machine has two
cores; the jobs' own cluster has four ranks, which would share cores here) and the
dp and burst strategies (dp only on one rank):

  - plans with `burstc plan --profile` and with the analytic `cpu` device
    (examples/clusters/cpu.burst), both in the same run;
  - builds each plan's program (`burstc build`, the same --profile for the
    profiled plan) and trains it under mpirun, one rank per core, one thread each,
    synthetic data; the measured iteration time is the median over the steps
    after the warm-up of the slowest rank's step, and the median of --runs runs.
    The runs go in rounds (each round runs every program once), so that a slow
    stretch of the machine spoils one run of each program, not every run of one;
  - prints predicted against measured for both models.

The machine's load (other processes) is printed before and after: timings on a
shared machine are noisy, and the table says under what load it was measured.
With --paired, every round measures the profile afresh and runs each plan made
with it right after, and a row's error is the median over rounds of that
round's prediction over its run: on a machine whose speed drifts over minutes
(a virtual machine on a shared host) both sides of each ratio then see the same
speed. The analytic device's plans run in the same rounds and are scored the
same way (its prediction is fixed; its runs move with the machine).

    /usr/bin/python3 tests/bench/profile/plan_accuracy.py --burstc build/release/tools/burstc
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

JOBS = {"fmnist": "examples/jobs/fmnist_cpu.burst", "resnet": "examples/jobs/resnet_small_cpu.burst"}
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, **kw)
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
    return p.stdout


def profile(burstc, job, g, tmp, name):
    """The job's profile for plans of g ranks on this machine: `burstc profile
    --concurrent g` (g copies at once, each on its own core, as g ranks share the
    machine's memory and caches); its path."""
    prof = os.path.join(tmp, "%s-%d.profile" % (name, g))
    subprocess.run([burstc, "profile", job, "-o", prof, "--concurrent", str(g)], check=True,
                   env=ENV, stderr=subprocess.DEVNULL)
    return prof


def predicted(burstc, job, gpus, strategy, profile):
    cmd = [burstc, "plan", job, "--gpus", str(gpus), "--strategy", strategy]
    if profile:
        cmd += ["--profile", profile]
    out = run(cmd)
    m = re.search(r"^%s\s+([0-9.]+)\s" % strategy, out, re.M)
    if not m:
        sys.exit("no %s summary line in:\n%s" % (strategy, out))
    return float(m.group(1))


def build(burstc, job, gpus, strategy, profile, prog):
    cmd = [burstc, "build", job, "--gpus", str(gpus), "--strategy", strategy, "-o", prog]
    if profile:
        cmd += ["--profile", profile]
    run(cmd)


def measure_once(prog, gpus, tmp, iters, warmup):
    """One run of a program: the median over the steps after the warm-up of the
    slowest rank's step (ms)."""
    trace = os.path.join(tmp, "trace.json")
    run(["mpirun", "-np", str(gpus), "--bind-to", "core", "--map-by", "core", prog,
         "--iterations", str(iters), "--threads", "1", "--data", "synthetic",
         "--trace", trace], timeout=900)
    steps = {}
    for e in json.load(open(trace))["traceEvents"]:
        if e.get("ph") == "X" and e["name"] == "iteration" and e.get("tid", 0) == 0:
            steps.setdefault(e["pid"], []).append(e["dur"] / 1e3)
    per_step = [max(s[i] for s in steps.values()) for i in range(warmup, iters)]
    return statistics.median(per_step)


def paired(a, tmp):
    """--paired: every round measures each job's profile afresh and runs each
    profiled plan's program right after; the error of a round is its
    prediction over its run, and a row's error the median over rounds. Both
    sides of a ratio then see the machine in the same minute."""
    rows = {}
    for r in range(a.runs):
        for name in a.jobs.split(","):
            job = JOBS[name]
            for g in map(int, a.gpus.split(",")):
                prof = profile(a.burstc, job, g, tmp, name)
                for strategy in ("dp", "burst") if g > 1 else ("dp",):
                    pp = predicted(a.burstc, job, g, strategy, prof)
                    pa = predicted(a.burstc, job, g, strategy, None)
                    path = os.path.join(tmp, "prog")
                    build(a.burstc, job, g, strategy, prof, path)
                    mp = measure_once(path, g, tmp, a.iterations, a.warmup)
                    ma = mp
                    if strategy != "dp":  # dp is one plan for both models
                        build(a.burstc, job, g, strategy, None, path)
                        ma = measure_once(path, g, tmp, a.iterations, a.warmup)
                    rows.setdefault((name, g, strategy), []).append((pp, mp, pa, ma))
        print("  round %d of %d done (load %s)" % (r + 1, a.runs, load()), flush=True)
    print()
    print("paired: each round profiles afresh, then runs each plan made with that profile and"
          " the analytic `cpu` device's plan; median of %d rounds" % a.runs)
    print("%-7s %2s %-6s | %11s %11s | %-40s %7s | %11s | %-40s %7s" %
          ("job", "G", "plan", "measured ms", "profile ms", "profile's errors per round",
           "median", "analytic ms", "analytic's errors per round", "median"))
    for (name, g, strategy), v in rows.items():
        errs = [100 * (pp / mp - 1) for pp, mp, _, _ in v]
        errs_a = [100 * (pa / ma - 1) for _, _, pa, ma in v]
        print("%-7s %2d %-6s | %11.3f %11.3f | %-40s %+6.1f%% | %11.3f | %-40s %+6.1f%%" %
              (name, g, strategy, statistics.median(x[1] for x in v),
               statistics.median(x[0] for x in v), " ".join("%+.1f" % e for e in errs),
               statistics.median(errs), v[0][2], " ".join("%+.1f" % e for e in errs_a),
               statistics.median(errs_a)))


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", default="build/release/tools/burstc")
    ap.add_argument("--gpus", default="1,2", help="rank counts, one rank per core (default 1,2)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--jobs", default="fmnist,resnet")
    ap.add_argument("--paired", action="store_true",
                    help="profile afresh in every round and pair each round's predictions (the"
                    " profile's and the analytic device's) with their runs")
    a = ap.parse_args()
    print("load average (1 min) at start: %s on %d CPUs" % (load(), os.cpu_count()))
    if a.paired:
        with tempfile.TemporaryDirectory() as tmp:
            paired(a, tmp)
        print("load average (1 min) at end: %s" % load())
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        # Every program is built first; then each round runs every program once,
        # so that a slow stretch of the machine spoils one run of each, not all
        # runs of one.
        progs = []  # (row key, which plan, gpus, path)
        for name in a.jobs.split(","):
            job = JOBS[name]
            for g in map(int, a.gpus.split(",")):
                t0 = time.time()
                prof = profile(a.burstc, job, g, tmp, name)
                took = time.time() - t0
                for strategy in ("dp", "burst") if g > 1 else ("dp",):
                    key = (name, g, strategy)
                    pp = predicted(a.burstc, job, g, strategy, prof)
                    pa = predicted(a.burstc, job, g, strategy, None)
                    rows.append([name, g, strategy, took, None, pp, None, pa])
                    path = os.path.join(tmp, "%s-%d-%s-profiled" % key)
                    build(a.burstc, job, g, strategy, prof, path)
                    progs.append((key, "profiled", g, path))
                    if strategy != "dp":  # dp is one plan for both models
                        path = os.path.join(tmp, "%s-%d-%s-analytic" % key)
                        build(a.burstc, job, g, strategy, None, path)
                        progs.append((key, "analytic", g, path))
        times = {}
        for r in range(a.runs):
            for key, which, g, path in progs:
                times.setdefault((key, which), []).append(
                    measure_once(path, g, tmp, a.iterations, a.warmup))
            print("  round %d of %d done (load %s)" % (r + 1, a.runs, load()), flush=True)
        for row in rows:
            key = tuple(row[:3])
            runs_p = times[(key, "profiled")]
            runs_a = times.get((key, "analytic"), runs_p)
            row[4], row[6] = statistics.median(runs_p), statistics.median(runs_a)
            row.append(min(runs_p))
            print("  %s G=%d %s: profiled plan runs %s ms, analytic plan runs %s ms" %
                  (key + (" ".join("%.2f" % t for t in runs_p), " ".join("%.2f" % t for t in runs_a))))
    print()
    print("G ranks (one core and one thread each), synthetic data; measured: median step of"
          " the slowest rank, median of %d runs" % a.runs)
    print("%-7s %2s %-6s %9s | %11s %11s %7s %8s %7s | %11s %11s %7s" %
          ("job", "G", "plan", "profile s", "measured ms", "profile ms", "error", "best ms",
           "error", "measured ms", "analytic ms", "error"))
    for name, g, strategy, took, mp, pp, ma, pa, best in rows:
        print("%-7s %2d %-6s %9.1f | %11.3f %11.3f %+6.1f%% %8.3f %+6.1f%% | %11.3f %11.3f %+6.1f%%" %
              (name, g, strategy, took, mp, pp, 100 * (pp / mp - 1), best, 100 * (pp / best - 1),
               ma, pa, 100 * (pa / ma - 1)))
    print("(left: the plan made with the measured profile, against the median run and the"
          " best run; right: the plan of the analytic `cpu` device; dp is one plan for both)")
    print("load average (1 min) at end: %s" % load())


if __name__ == "__main__":
    main()
