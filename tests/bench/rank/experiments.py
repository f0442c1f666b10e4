#!/usr/bin/python3
"""experiments.py: reproduces the published top-K ranking experiments with `burstc rank`.

Not a test.  Drives `burstc rank --simulate` (Monte Carlo trials on generated BTL data,
see docs/rank.md) and writes tables, plots and a summary into an output folder:

  vs_L      success rate and l-inf error of the spectral method and Spectral MLE
            against L (comparisons per pair), n=500, K=10, Delta_K=0.1,
            dense p=0.25 (L=1..25) and sparse p=0.025 (L=10..250)
  samples   the smallest number of comparisons giving success >= 0.95, over
            Delta_K (n=200, L=20) and over n (L=5, Delta_K=0.4), found by bisection on
            p; fitted against n log n / Delta_K^2

usage: experiments.py BURSTC_RANK [--out DIR] [--trials T] [--probe-trials T]
                      [--only vs_L|samples] [--prefix ARGS]
BURSTC_RANK is the burstc binary, run with --prefix rank.
"""
import argparse
import csv
import io
import json
import math
import os
import subprocess
import sys
import time


def simulate(args, n, k, delta, p, L, trials, seed, methods):
    cmd = [args.binary] + args.prefix + [
        "--simulate", f"n={n},k={k},delta={delta},p={p:.10g},L={L}",
        "--trials", str(trials), "--seed", str(seed), "--csv",
        "--methods", ",".join(methods), "--threads", str(args.threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    return {r["method"]: r for r in rows}, " ".join(cmd)


def vs_L(args, log):
    results = []
    regimes = [("dense", 0.25, [1, 2, 3, 4, 5, 7, 10, 15, 20, 25]),
               ("sparse", 0.025, [10, 20, 30, 50, 75, 100, 150, 200, 250])]
    for name, p, Ls in regimes:
        for L in Ls:
            t0 = time.time()
            rows, cmd = simulate(args, 500, 10, 0.1, p, L, args.trials, 1000 + L,
                                 ["spectral", "spectral-mle"])
            log.write(cmd + "\n")
            for m, r in rows.items():
                results.append({"regime": name, "p": p, "L": L, "method": m,
                                "success": float(r["success"]),
                                "success_lo": float(r["success_lo"]),
                                "success_hi": float(r["success_hi"]),
                                "linf": float(r["linf_error"]),
                                "linf_lo": float(r["linf_lo"]),
                                "linf_hi": float(r["linf_hi"]),
                                "skipped": int(r["skipped"])})
            print(f"vs_L {name} L={L}: " + ", ".join(
                f"{m} {float(r['success']):.3f} / {float(r['linf_error']):.4f}"
                for m, r in rows.items()) + f"  ({time.time() - t0:.1f} s)", flush=True)
    with open(os.path.join(args.out, "vs_L.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(results[0].keys()))
        w.writeheader()
        w.writerows(results)
    plot_vs_L(args, results)
    return results


def plot_vs_L(args, results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for col, regime in enumerate(["dense", "sparse"]):
        for m, style in [("spectral", "o-"), ("spectral-mle", "s--")]:
            rs = [r for r in results if r["regime"] == regime and r["method"] == m]
            Ls = [r["L"] for r in rs]
            ax = axes[0][col]
            ax.errorbar(Ls, [r["success"] for r in rs],
                        yerr=[[r["success"] - r["success_lo"] for r in rs],
                              [r["success_hi"] - r["success"] for r in rs]],
                        fmt=style, capsize=2, label=m)
            ax.set_title(f"{regime}: p={rs[0]['p']}, n=500, K=10, $\\Delta_K$=0.1")
            ax.set_ylabel("top-K success rate")
            ax.set_ylim(-0.02, 1.02)
            ax = axes[1][col]
            ax.errorbar(Ls, [r["linf"] for r in rs],
                        yerr=[[r["linf"] - r["linf_lo"] for r in rs],
                              [r["linf_hi"] - r["linf"] for r in rs]],
                        fmt=style, capsize=2, label=m)
            ax.set_ylabel("$\\ell_\\infty$ error (normalised)")
            ax.set_xlabel("L (comparisons per pair)")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "vs_L.svg"))
    fig.savefig(os.path.join(args.out, "vs_L.png"), dpi=90)


def min_samples(args, n, k, delta, L, seed, log):
    """Smallest p (as samples p L n(n-1)/2) with spectral success >= 0.95, by bisection
    on log p.  Success is a noisy estimate, so the answer is good to the probe noise."""
    pairs = n * (n - 1) / 2
    lo, hi = math.log(max(2.0 * math.log(n) / n, 1e-4)), 0.0  # below connectivity .. p=1
    rows, cmd = simulate(args, n, k, delta, 1.0, L, args.probe_trials, seed, ["spectral"])
    log.write(cmd + "\n")
    if float(rows["spectral"]["success"]) < 0.95:
        return None
    for _ in range(args.bisect_steps):
        mid = 0.5 * (lo + hi)
        rows, cmd = simulate(args, n, k, delta, math.exp(mid), L, args.probe_trials, seed,
                             ["spectral"])
        log.write(cmd + "\n")
        if float(rows["spectral"]["success"]) >= 0.95:
            hi = mid
        else:
            lo = mid
    p = math.exp(hi)
    return p, p * L * pairs


def fit(points):
    """Least squares S = c x through the origin, R^2 of that fit, and the log-log slope
    of S against x (1 means exactly proportional)."""
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    c = sum(x * y for x, y in points) / sum(x * x for x in xs)
    mean = sum(ys) / len(ys)
    ss_res = sum((y - c * x) ** 2 for x, y in points)
    ss_tot = sum((y - mean) ** 2 for y in ys)
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    slope = sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)
    return c, 1 - ss_res / ss_tot if ss_tot > 0 else 1.0, slope


def samples(args, log):
    out = []
    for delta in [0.1, 0.15, 0.2, 0.25, 0.3]:
        t0 = time.time()
        r = min_samples(args, 200, 10, delta, 20, 77, log)
        out.append({"sweep": "delta", "n": 200, "L": 20, "delta": delta,
                    "p": r[0] if r else None, "samples": r[1] if r else None})
        print(f"samples delta={delta}: {out[-1]}  ({time.time() - t0:.1f} s)", flush=True)
    for n in [200, 400, 700, 1000, 1500]:
        t0 = time.time()
        r = min_samples(args, n, 10, 0.4, 5, 78, log)
        out.append({"sweep": "n", "n": n, "L": 5, "delta": 0.4,
                    "p": r[0] if r else None, "samples": r[1] if r else None})
        print(f"samples n={n}: {out[-1]}  ({time.time() - t0:.1f} s)", flush=True)
    summary = {}
    for sweep in ["delta", "n", "both"]:
        pts = [(o["n"] * math.log(o["n"]) / o["delta"] ** 2, o["samples"]) for o in out
               if (sweep == "both" or o["sweep"] == sweep) and o["samples"]]
        if len(pts) >= 2:
            c, r2, slope = fit(pts)
            summary[sweep] = {"c": c, "r2": r2, "loglog_slope": slope, "points": len(pts)}
    with open(os.path.join(args.out, "samples.json"), "w") as f:
        json.dump({"points": out, "fit": summary}, f, indent=2)
    print("fit S = c n log n / Delta^2:", json.dumps(summary, indent=2), flush=True)
    return out, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--out", default="tests/bench/results-rank")
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--probe-trials", type=int, default=200)
    ap.add_argument("--bisect-steps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", choices=["vs_L", "samples"])
    ap.add_argument("--prefix", nargs="*", default=["rank"])
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "commands.txt"), "a") as log:
        if args.only in (None, "vs_L"):
            vs_L(args, log)
        if args.only in (None, "samples"):
            samples(args, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
