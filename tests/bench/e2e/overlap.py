#!/usr/bin/python3
"""Gradient all-reduce overlapped with the backward pass, on and off, for a plan whose
all-reduces are large: the Fashion-MNIST job's data-parallel plan on 4 ranks (every
layer's gradients over all 4).

Builds the program once and runs it alternately with the overlap (the default:
all-reduces start when a layer's gradient is ready, in buckets of --bucket-mb) and with
--no-overlap (one all-reduce per rank set after the backward), ROUNDS times each, for
WARMUP + STEPS steps under --trace. Per run, from rank 0's trace: the mean iteration
time and the time per step spent waiting for the gradient all-reduces before the
optimizer (`grad_allreduce.wait`). With the overlap off that wait is the whole
all-reduce; with it on, what was not hidden. Hidden fraction = 1 - on / off. Next to it,
the planner's assumption: `burstc plan --json` for the same plan with and without
--overlap-allreduce. The layers' `allreduce_s` are the all-reduces' whole time either way;
what the overlap hides in the planner's model is the difference of the two iteration
times.

    /usr/bin/python3 tests/bench/e2e/overlap.py [--burstc build/release/tools/burstc]
        [--ranks 4] [--rounds 3] [--steps 40] [--warmup 5] [--bucket-mb 25]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
JOB = os.path.join(ROOT, "examples/jobs/fmnist_cpu.burst")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_mpi_yield_when_idle="1")


def run(prog, ranks, steps, warmup, extra, tmp):
    trace = os.path.join(tmp, "trace.json")
    subprocess.run(["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none", prog,
                    "--iterations", str(steps + warmup), "--data", "fmnist", "--trace", trace] + extra,
                   check=True, capture_output=True, env=ENV, timeout=1200)
    events = [e for e in json.load(open(trace))["traceEvents"] if e.get("ph") == "X" and e.get("pid") == 0]
    its = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e["name"] == "iteration")[warmup:]
    lo, hi = its[0][0], its[-1][1]
    wait = sum(e["dur"] for e in events if e["name"] == "grad_allreduce.wait" and lo <= e["ts"] <= hi)
    return statistics.mean(b - a for a, b in its) / 1e3, wait / 1e3 / len(its)


def planned(burstc, ranks, overlap, tmp):
    out = os.path.join(tmp, "plan.json")
    subprocess.run([burstc, "plan", "--gpus", str(ranks), "--strategy", "dp", "--json", out, JOB] +
                   (["--overlap-allreduce"] if overlap else []), check=True, capture_output=True)
    plan = next(p for p in json.load(open(out))["plans"] if p["strategy"] == "dp")
    return plan["time_s"] * 1e3, sum(l["allreduce_s"] for l in plan["layers"]) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", default=os.path.join(ROOT, "build/release/tools/burstc"))
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--bucket-mb", default="25")
    a = ap.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "prog")
        subprocess.run([a.burstc, "build", "--gpus", str(a.ranks), "--strategy", "dp", JOB, "-o", prog],
                       check=True, capture_output=True)
        res = {"on": [], "off": []}
        for r in range(a.rounds):
            for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
                extra = ["--bucket-mb", a.bucket_mb] if mode == "on" else ["--no-overlap"]
                res[mode].append(run(prog, a.ranks, a.steps, a.warmup, extra, tmp))
        p_off, ar_off = planned(a.burstc, a.ranks, False, tmp)
        p_on, _ = planned(a.burstc, a.ranks, True, tmp)
    print("fmnist_cpu, dp on %d ranks, %d steps after %d of warm-up, median of %d runs each "
          "(alternating); load average %.1f at start, %.1f at end"
          % (a.ranks, a.steps, a.warmup, a.rounds, load[0], os.getloadavg()[0]))
    print("%-12s %14s %20s" % ("overlap", "iteration ms", "all-reduce wait ms"))
    for mode in ("off", "on"):
        print("%-12s %14.2f %20.2f" % (mode, statistics.median(x[0] for x in res[mode]),
                                       statistics.median(x[1] for x in res[mode])))
    off_it = statistics.median(x[0] for x in res["off"])
    on_it = statistics.median(x[0] for x in res["on"])
    off_w = statistics.median(x[1] for x in res["off"])
    on_w = statistics.median(x[1] for x in res["on"])
    print("measured: iteration %.2fx with overlap; all-reduce time hidden %.0f%%"
          % (on_it / off_it, 100 * (1 - on_w / off_w) if off_w > 0 else 0))
    hidden = p_off - p_on
    print("planner (burstc plan, dp): iteration %.2f ms without overlap, %.2f ms with "
          "--overlap-allreduce; all-reduces %.2f ms a step, of which %.2f ms hidden (%.0f%%)"
          % (p_off, p_on, ar_off, hidden, 100 * hidden / ar_off if ar_off > 0 else 0))


if __name__ == "__main__":
    main()
