#!/usr/bin/python3
"""dense_numpy.py: a dense numpy reference for Rank Centrality, and burstc's speedup over it.

Not a test.  Reads a comparison file (lines "winner,loser[,count]"), builds the full
n x n transition matrix of the Rank Centrality chain (move from i to j in proportion
to the fraction of their games that j won, divided by d_max; the rest a self-loop)
and solves pi (P - I) = 0, sum pi = 1 directly with numpy.linalg.solve.  Then runs
`burstc rank FILE --all --csv` on the same file, checks that both give the same
scores and top K, and prints the times (median of RUNS) and the speedup.

usage: dense_numpy.py BURSTC_RANK FILE [--k K] [--runs R] [--prefix ARGS]
"""
import argparse
import subprocess
import sys
import time

import numpy as np


def load(path):
    names, ids, rows = [], {}, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split(",")]
            c = int(parts[2]) if len(parts) > 2 else 1
            for name in parts[:2]:
                if name not in ids:
                    ids[name] = len(names)
                    names.append(name)
            rows.append((ids[parts[0]], ids[parts[1]], c))
    return names, np.array(rows, dtype=np.int64)


def dense_rank_centrality(n, rows):
    wins = np.zeros((n, n))
    np.add.at(wins, (rows[:, 0], rows[:, 1]), rows[:, 2])
    games = wins + wins.T
    met = games > 0
    dmax = met.sum(axis=1).max()
    with np.errstate(invalid="ignore", divide="ignore"):
        frac_j_beat_i = np.where(met, wins.T / games, 0.0)  # [i, j]: share of i-j games j won
    P = frac_j_beat_i / dmax
    P[np.diag_indices(n)] = 1.0 - P.sum(axis=1)
    A = (P - np.eye(n)).T
    A[-1, :] = 1.0
    b = np.zeros(n)
    b[-1] = 1.0
    return np.linalg.solve(A, b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("file")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--prefix", nargs="*", default=["rank"])
    a = ap.parse_args()

    t0 = time.perf_counter()
    names, rows = load(a.file)
    t_parse = time.perf_counter() - t0
    n = len(names)
    times, pi = [], None
    for _ in range(a.runs):
        t0 = time.perf_counter()
        pi = dense_rank_centrality(n, rows)
        times.append(time.perf_counter() - t0)
    t_np = sorted(times)[len(times) // 2]

    cmd = [a.binary] + a.prefix + [a.file, "--all", "--csv", "--tol", "1e-13"]
    btimes, out = [], ""
    for _ in range(a.runs):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        btimes.append(time.perf_counter() - t0)
    t_b = sorted(btimes)[len(btimes) // 2]
    theirs = {}
    for line in out.splitlines()[1:]:
        _, name, score = line.split(",")  # generated names have no comma or quote
        theirs[name] = float(score)
    ours = np.array([theirs[nm] for nm in names])
    top_np = set(np.argsort(-pi, kind="stable")[: a.k])
    top_b = set(np.argsort(-ours, kind="stable")[: a.k])
    print(f"file {a.file}: n={n}, {rows[:, 2].sum()} comparisons, {len(rows)} lines")
    print(f"numpy: parse {t_parse:.3f} s, build+solve median {t_np:.3f} s over {a.runs} runs")
    print(f"burstc rank (whole command incl. parse, process start): median {t_b:.4f} s")
    print(f"speedup (numpy build+solve / burstc whole command): {t_np / t_b:.1f}x")
    print(f"max |score difference| = {np.abs(ours - pi).max():.2e}; same top {a.k}: "
          f"{top_np == top_b}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
