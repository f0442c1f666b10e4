#!/usr/bin/env python3
"""How well the planner's cost model predicts one rank on this machine, and
the fit of the `cpu` device of examples/clusters/cpu.burst.

Report (the default): for the Fashion-MNIST and residual CPU jobs, measures
every layer's forward and backward time on one rank pinned to one core
(`burstc profile`, the medians of its timed steps) at the per-rank batches
the jobs' plans on 1, 2 and 4 ranks use (JOBS), and sets next to each what
`burstc plan --json` predicts for the same layer at the same batch.

With --fit it searches, per class of layer (conv, gemm, pool, other: the
`gpu` record's `efficiency CLASS`, `half_work CLASS`, `bandwidth CLASS`), the
curve that best explains those measurements: a grid over efficiency,
half_work and bandwidth, every point priced by burstc itself (`burstc plan`
on a copy of the cluster file holding the candidate record), least squares
on log(predicted / measured) of every layer's forward and backward, each
weighted by its share of its batch's measured step; then the launch overhead
with the classes fixed. With --write it replaces the `gpu cpu` record of
examples/clusters/cpu.burst by the fitted one: that is how the file was
calibrated.

    python3 tests/bench/e2e/cpu_model.py [--burstc build/release/tools/burstc]
        [--profiles DIR] [--fit [--write]]

Measure under the lock: flock /tmp/measure.lock setsid nice -n -20 python3 ...
"""
import argparse
import json
import math
import os
import re
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CLUSTER = os.path.join(ROOT, "examples/clusters/cpu.burst")
# The per-rank batches of the jobs' plans on 1, 2 and 4 ranks (fmnist at 64,
# resnet_small at 32), where the fit should hold.
JOBS = {"fmnist_cpu": (16, 32, 64), "resnet_small_cpu": (8, 16, 32)}
CLASSES = {"conv2d": "conv", "linear": "gemm", "matmul": "gemm", "maxpool2d": "pool",
           "avgpool2d": "pool", "global_avgpool": "pool"}
EFFICIENCY = (0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.18, 0.25, 0.35, 0.5, 0.7, 1.0)
HALF_WORK = (0, 1e4, 1e5, 3e5, 1e6, 3e6, 1e7)
BANDWIDTH = (1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48)  # GB/s
LAUNCH = (0, 0.25, 0.5, 1, 2, 5)  # us


def job_path(name):
    return os.path.join(ROOT, "examples/jobs/%s.burst" % name)


def profile(burstc, name, batches, out):
    """Measured (fwd s, bwd s, op) per (layer, batch) from `burstc profile`."""
    if not os.path.exists(out):
        subprocess.run([burstc, "profile", job_path(name), "--batches", ",".join(map(str, batches)),
                        "--repeat", "15", "-o", out], check=True, capture_output=True)
    m = {}
    for ln in open(out):
        g = re.match(r'layer\{"name":"([^"]+)","op":"([^"]+)"\}\[(\d+)\]\S*\s+(\S+)\s+(\S+)', ln)
        if g:
            m[(g.group(1), int(g.group(3)))] = (float(g.group(4)) * 1e-3, float(g.group(5)) * 1e-3,
                                               g.group(2))
    return m


def predict(burstc, job, batch, tmp):
    """(fwd s, bwd s) per layer that `burstc plan` predicts on one rank at this batch."""
    out = os.path.join(tmp, "plan.json")
    subprocess.run([burstc, "plan", "--gpus", "1", "--batch", str(batch), "--strategy", "dp", "--json",
                    out, job], check=True, capture_output=True)
    plan = next(p for p in json.load(open(out))["plans"] if p["strategy"] == "dp")
    return {l["name"]: (l["fwd_s"], l["bwd_s"]) for l in plan["layers"]}


def record(curves, launch):
    """The gpu record: 140 GFLOPS (one core's AVX-512 sgemm peak), 4 GiB, a
    device-wide bandwidth (the largest class's: what the optimizer and
    background steps are priced with) and one curve per class."""
    lines = ["gpu cpu {", "  flops f32 = 140 GFLOPS", "  memory = 4 GiB",
             "  bandwidth = %g GB/s" % curves["other"][2], "  launch = %g us" % launch]
    for cls in ("conv", "gemm", "pool", "other"):
        eff, half, bw = curves[cls]
        lines += ["  efficiency %s = %g" % (cls, eff), "  half_work %s = %g" % (cls, half),
                  "  bandwidth %s = %g GB/s" % (cls, bw)]
    return "\n".join(lines) + "\n}\n"


def with_record(src, rec):
    start = src.index("gpu cpu {")
    return src[:start] + rec + src[src.index("\n}\n", start) + 3:]


def copy_jobs(tmp, cluster_text):
    """The jobs and the cluster file copied into tmp, the jobs importing the copy."""
    open(os.path.join(tmp, "cpu.burst"), "w").write(cluster_text)
    jobs = {}
    for name in JOBS:
        text = open(job_path(name)).read().replace('"../clusters/cpu.burst"', '"cpu.burst"')
        text = text.replace('"../models/', '"' + os.path.join(ROOT, "examples/models") + "/")
        jobs[name] = os.path.join(tmp, name + ".burst")
        open(jobs[name], "w").write(text)
    return jobs


def samples(burstc, jobs, measured, tmp):
    """(class, weight, predicted, measured) for every layer's forward and backward."""
    out = []
    for name, batches in JOBS.items():
        for b in batches:
            pred = predict(burstc, jobs[name], b, tmp)
            total = sum(f + bw for (l, bb), (f, bw, _) in measured[name].items() if bb == b)
            for (l, bb), (f, bw, op) in measured[name].items():
                if bb != b or l not in pred:
                    continue
                for p, m in zip(pred[l], (f, bw)):
                    if m > 0 and p > 0:
                        out.append((CLASSES.get(op, "other"), m / total, p, m))
    return out


def fit(burstc, measured, tmp):
    src = open(CLUSTER).read()
    err = {}  # (class, point) -> weighted squared log error
    for eff in EFFICIENCY:
        for half in HALF_WORK:
            for bw in BANDWIDTH:
                pt = (eff, half, bw)
                rec = record({c: pt for c in ("conv", "gemm", "pool", "other")}, 1)
                jobs = copy_jobs(tmp, with_record(src, rec))
                for cls, w, p, m in samples(burstc, jobs, measured, tmp):
                    err[(cls, pt)] = err.get((cls, pt), 0) + w * math.log(p / m) ** 2
    best = {}
    for (cls, pt), e in err.items():
        if cls not in best or e < best[cls][0]:
            best[cls] = (e, pt)
    curves = {c: best[c][1] if c in best else (0.1, 1e6, 4) for c in ("conv", "gemm", "pool", "other")}
    scores = []
    for launch in LAUNCH:
        jobs = copy_jobs(tmp, with_record(src, record(curves, launch)))
        scores.append((sum(w * math.log(p / m) ** 2 for _, w, p, m in samples(burstc, jobs, measured, tmp)),
                       launch))
    return record(curves, min(scores)[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", default=os.path.join(ROOT, "build/release/tools/burstc"))
    ap.add_argument("--profiles", help="keep the measured profiles in (and reuse them from) this folder")
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--write", action="store_true", help="with --fit: write the record into %s" % CLUSTER)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pdir = a.profiles or tmp
        os.makedirs(pdir, exist_ok=True)
        print("load average at start %s" % " ".join("%.2f" % x for x in os.getloadavg()))
        measured = {n: profile(a.burstc, n, b, os.path.join(pdir, n + ".profile")) for n, b in JOBS.items()}
        print("load average after measuring %s" % " ".join("%.2f" % x for x in os.getloadavg()))
        if a.fit:
            rec = fit(a.burstc, measured, tmp)
            print("best fit for %s:" % os.path.relpath(CLUSTER, ROOT))
            print(rec)
            if a.write:
                path = CLUSTER + ".tmp"
                open(path, "w").write(with_record(open(CLUSTER).read(), rec))
                os.replace(path, CLUSTER)
        jobs = copy_jobs(tmp, open(CLUSTER).read())
        for name, batches in JOBS.items():
            for b in batches:
                pred = predict(a.burstc, jobs[name], b, tmp)
                rows = [(l, f + bw, sum(pred.get(l, (0, 0)))) for (l, bb), (f, bw, _) in measured[name].items()
                        if bb == b]
                mt, pt = sum(r[1] for r in rows), sum(r[2] for r in rows)
                print()
                print("%s, one rank, batch %d: measured (burstc profile, medians) vs predicted, fwd+bwd"
                      % (name, b))
                print("%-14s %12s %12s %8s %7s" % ("layer", "measured ms", "predicted ms", "ratio", "share"))
                for l, m, p in rows:
                    print("%-14s %12.3f %12.3f %8s %6.1f%%" % (l, 1e3 * m, 1e3 * p,
                                                              "%.2f" % (p / m) if m > 0 else "-", 100 * m / mt))
                print("%-14s %12.3f %12.3f %8.2f" % ("layers", 1e3 * mt, 1e3 * pt, pt / mt))


if __name__ == "__main__":
    main()
