#!/usr/bin/python3
"""Burst + multiplexing never loses on the study's cells (issue 37): for each cell
(a `_bg` job of tests/bench/sim/jobs with DeepPool's A100 profile, at a GPU count
and a global batch), `burstc plan --json` gives every strategy's auto choice with
its multiplexing, and `burstc plan --frontier --json` gives burst's rows. Every
dp + mux and deeppool + mux point must be weakly dominated, in foreground and in
cluster samples/s with 0.5% slack, by the row of one of the vertices of burst's
frontier (as it is, or with slices only where they fit); the rows of dp's and
deeppool's own plans, which burst's search space also holds, do not count. burst's
own auto choice must be at least as high in cluster samples/s as dp's and
deeppool's (0.5% slack) whenever their foreground is within the same limit.

The cells (--cells, MODEL:GPUS:BATCH with MODEL vgg16, wrn101 or inception): by
default DeepPool's own setting on one node (1, 2, 4, 8 GPUs; VGG-16 and WRN-101-2
@ 16, Inception-v3 @ 32, but Inception at 8 GPUs, whose exact frontier is the
longest cell: ctest runs it and Inception at 64 GPUs as a test of their own,
planner.study_domination_inception) and two of the study's larger cells (VGG-16
and WRN-101-2 on 64 GPUs at 256).

usage: study_domination.py --burstc BURSTC --jobs DIR --profiles DIR [--cells ...]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SLACK = 0.005
MODELS = {  # short name: job stem, profile
    "vgg16": ("study_vgg16_bg", "vggLayerGpuProfileA100.txt"),
    "wrn101": ("study_wrn101_bg", "wrnLayerGpuProfileA100V2.txt"),
    "inception": ("study_inception_bg", "inceptionLayerGpuProfileA100V2.txt"),
}
CELLS = ",".join(["vgg16:%d:16,wrn101:%d:16" % (g, g) for g in (1, 2, 4, 8)] +
                 ["inception:%d:32" % g for g in (1, 2, 4)] + ["vgg16:64:256,wrn101:64:256"])


def plan(burstc, args, out):
    cmd = [burstc, "plan", "--json", out] + args
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise SystemExit("%s: exit %d\n%s" % (" ".join(cmd), p.returncode, p.stderr))
    with open(out) as f:
        return json.load(f)


def dominates(row, pt):
    a, b = row["mux"], pt["mux"]
    return (a["fg_samples_per_s"] >= b["fg_samples_per_s"] * (1 - SLACK) and
            a["cluster_samples_per_s"] >= b["cluster_samples_per_s"] * (1 - SLACK))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--jobs", required=True)
    ap.add_argument("--profiles", required=True)
    ap.add_argument("--cells", default=CELLS)
    a = ap.parse_args()
    cells = []
    for c in filter(None, a.cells.split(",")):
        m, g, b = c.split(":")
        cells.append((MODELS[m], int(g), int(b)))
    bad, by_vertex, checked = [], 0, 0
    with tempfile.TemporaryDirectory() as d:
        for (stem, prof), g, batch in cells:
            args = ["--gpus", str(g), "--batch", str(batch), "--profile",
                    os.path.join(a.profiles, prof), os.path.join(a.jobs, stem + ".burst")]
            cell = "%s --gpus %d --batch %d" % (stem, g, batch)
            plans = {p["strategy"]: p for p in plan(a.burstc, args, os.path.join(d, "p.json"))["plans"]}
            rows = plan(a.burstc, ["--frontier"] + args, os.path.join(d, "f.json"))["frontier"]
            for s in ("dp", "deeppool"):
                if s not in plans or "mux" not in plans[s]:
                    continue
                pt = plans[s]
                checked += 1
                over = [r for r in rows if r["vertex"] and dominates(r, pt)]
                line = "%-44s %-8s fg %9.1f cluster %11.1f" % (
                    cell, s, pt["mux"]["fg_samples_per_s"], pt["mux"]["cluster_samples_per_s"])
                if not over:
                    others = [r["from"] for r in rows if dominates(r, pt)]
                    bad.append("%s: dominated by no vertex's row of burst's frontier%s" %
                               (line, " (only by: %s)" % "; ".join(others) if others else ""))
                    continue
                by_vertex += 1
                print("%s  dominated by: %s" % (line, over[0]["from"]))
                bm, om = plans["burst"]["mux"], pt["mux"]
                if (om["fg_time_bg_s"] <= om["time_limit_s"] * (1 + 1e-9) and
                        bm["cluster_samples_per_s"] < om["cluster_samples_per_s"] * (1 - SLACK)):
                    bad.append("%s: burst + mux's cluster %.1f samples/s is below %s + mux's %.1f" %
                               (cell, bm["cluster_samples_per_s"], s, om["cluster_samples_per_s"]))
    print("%d points of %d cells checked, %d dominated by a vertex's row" % (checked, len(cells), by_vertex))
    if bad or checked == 0:
        print("\n".join(bad) or "no point checked")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
