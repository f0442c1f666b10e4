#!/usr/bin/env python3
"""How well the planner's cost model predicts a real run on this machine.

Builds the Fashion-MNIST job for one rank (the `cpu` GPU of
examples/clusters/cpu.burst: one core of this machine), trains it with
--trace, and sets the measured per-layer forward+backward time (mean over the
steps after the warm-up) next to what `burstc plan --json` predicts for the
same plan. Prints the ratio per layer and for the whole iteration.

With --fit it also searches the `cpu` GPU's efficiency, half_work, bandwidth
and launch that best explain the measurement (least squares on log ratios)
and prints them as a gpu record: that is how examples/clusters/cpu.burst was
calibrated.

    python3 tests/bench/e2e/cpu_model.py [--burstc build/release/tools/burstc] [--fit]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import tempfile

JOB = "examples/jobs/fmnist_cpu.burst"
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def measure(burstc, tmp, iters, warmup):
    prog, trace = os.path.join(tmp, "prog"), os.path.join(tmp, "trace.json")
    subprocess.run([burstc, "build", "--gpus", "1", "--strategy", "dp", JOB, "-o", prog], check=True)
    subprocess.run(["mpirun", "-np", "1", prog, "--iterations", str(iters), "--data", "fmnist", "--trace", trace],
                   check=True, capture_output=True, env=ENV)
    events = json.load(open(trace))["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == "iteration")[warmup:]
    per = {}
    for e in events:
        # Only the layers inside the timed training steps (not the test-set evaluation after them).
        if e.get("ph") != "X" or e["name"] == "iteration" or not any(a <= e["ts"] <= b for a, b in steps):
            continue
        layer = e["name"][:-4] if e["name"].endswith(".bwd") else e["name"]
        per.setdefault(layer, 0.0)
        per[layer] += e["dur"] * 1e-6
    n = iters - warmup
    iteration = statistics.mean((b - a) * 1e-6 for a, b in steps)
    return {k: v / n for k, v in per.items()}, iteration


def predict(burstc, tmp, job=JOB):
    out = os.path.join(tmp, "plan.json")
    subprocess.run([burstc, "plan", "--gpus", "1", "--strategy", "dp", "--json", out, job], check=True,
                   capture_output=True)
    plan = next(p for p in json.load(open(out))["plans"] if p["strategy"] == "dp")
    return {l["name"]: l["fwd_s"] + l["bwd_s"] for l in plan["layers"]}, plan["time_s"]


def fit(burstc, tmp, measured):
    """Grid search over the cpu GPU's curve; returns the best gpu record text."""
    src = open("examples/clusters/cpu.burst").read()
    best = None
    for eff in (0.1, 0.15, 0.2, 0.3, 0.45, 0.6, 0.8):
        for half in (1e3, 1e4, 1e5, 1e6, 1e7):
            for bw in (0.5, 1, 2, 4, 8):
                for launch in (1, 5, 20):
                    record = ("gpu cpu {\n  flops f32 = 140 GFLOPS\n  memory = 4 GiB\n  bandwidth = %g GB/s\n"
                              "  launch = %d us\n  efficiency = %g\n  half_work = %g\n}\n" % (bw, launch, eff, half))
                    start = src.index("gpu cpu {")
                    text = src[:start] + record + src[src.index("}", start) + 2:]
                    path = os.path.join(tmp, "cpu_fit.burst")
                    open(path, "w").write(text)
                    job = os.path.join(tmp, "job.burst")
                    open(job, "w").write(open(JOB).read().replace('"../clusters/cpu.burst"', '"cpu_fit.burst"')
                                         .replace('"../models/', '"' + os.path.abspath("examples/models") + '/'))
                    pred, _ = predict(burstc, tmp, job)
                    err = sum(math.log(pred[k] / measured[k]) ** 2 for k in pred if measured.get(k, 0) > 0 and pred[k] > 0)
                    if best is None or err < best[0]:
                        best = (err, record)
    return best[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", default="build/release/tools/burstc")
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--fit", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        measured, it_measured = measure(a.burstc, tmp, a.iterations, a.warmup)
        predicted, it_predicted = predict(a.burstc, tmp)
        print("fmnist_cnn, batch 64 on one rank: measured (mean of %d steps) vs predicted, forward+backward"
              % (a.iterations - a.warmup))
        print("%-10s %12s %12s %8s" % ("layer", "measured ms", "predicted ms", "ratio"))
        for name, p in predicted.items():
            m = measured.get(name, 0.0)
            print("%-10s %12.3f %12.3f %8s" % (name, 1e3 * m, 1e3 * p, "%.2f" % (p / m) if m > 0 else "-"))
        print("%-10s %12.3f %12.3f %8.2f" % ("iteration", 1e3 * it_measured, 1e3 * it_predicted,
                                             it_predicted / it_measured))
        if a.fit:
            print()
            print("best fit for examples/clusters/cpu.burst:")
            print(fit(a.burstc, tmp, measured))


if __name__ == "__main__":
    main()
