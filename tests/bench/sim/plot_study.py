#!/usr/bin/python3
"""The strong-scaling study's figures (issue 13, docs/cluster.md) from
`burstc sim --json` outputs.

Groups the runs by model and global batch; within a group, by strategy (a
run with background slices is labelled "STRATEGY + background") and cluster
size. Writes three SVGs into OUT_DIR, each with a panel per (model, batch):

  cluster_throughput.svg  cluster samples/s (foreground + background) over
                          dp's (without background) at the same size
  iteration_time.svg      the foreground's simulated iteration time (mean)
  utilisation.svg         mean GPU busy %, foreground + background
  gpu_equivalents.svg     every job's samples/s over its samples/s alone on
                          one GPU, summed: work in dedicated GPUs, at most G

and prints the numbers as Markdown tables: a summary (a row per model,
batch and cluster size, a cell per strategy) and every run's numbers. The runs
must hold a dp run without background for every (model, batch, GPUs) that is
to be normalised; others get "-" and no point.

    /usr/bin/python3 tests/bench/sim/plot_study.py OUT_DIR RUN.json [RUN.json ...]

Uses Debian's python3-matplotlib (SVG backend; nothing is downloaded).
"""
import collections
import json
import os
import sys

import matplotlib

matplotlib.use("svg")
matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: smaller files, searchable
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ["dp", "deeppool", "pow2", "burst"]


def label(run):
    bg = run.get("background_slices", 0) > 0 or run["bg_samples_per_s"] > 0
    return run["strategy"] + (" + background" if bg else "")


def label_key(lab):
    base = lab.split(" + ")[0]
    return (ORDER.index(base) if base in ORDER else len(ORDER), lab)


def load(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            r = json.load(f)
        for key in ("model", "batch", "gpus", "strategy", "mean_s", "fg_samples_per_s", "bg_samples_per_s",
                    "cluster_samples_per_s", "gpu_busy"):
            if key not in r:
                raise SystemExit("%s: not a burstc sim --json file (no '%s')" % (p, key))
        runs.append(r)
    return runs


def main():
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) > 1 else 2
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    runs = load(sys.argv[2:])
    groups = collections.OrderedDict()
    for r in sorted(runs, key=lambda r: (r["model"], r["batch"], r["gpus"])):
        groups.setdefault((r["model"], r["batch"]), []).append(r)
    dp = {(r["model"], r["batch"], r["gpus"]): r["cluster_samples_per_s"]
          for r in runs if label(r) == "dp"}

    def norm(r):
        base = dp.get((r["model"], r["batch"], r["gpus"]))
        return r["cluster_samples_per_s"] / base if base else None

    def geq(r):
        return r.get("gpu_equivalents")  # burstc sim before Dec 2 did not write it

    def fmt_geq(r):
        v = geq(r)
        return "%.2f GPU-eq" % v if v is not None else "- GPU-eq"

    metrics = [
        ("cluster_throughput.svg", "cluster throughput / dp", norm, False),
        ("iteration_time.svg", "foreground iteration (ms)", lambda r: r["mean_s"] * 1e3, True),
        ("utilisation.svg", "GPU busy % (fg + bg)",
         lambda r: 100 * (r["gpu_busy"]["fg_mean"] + r["gpu_busy"]["bg_mean"]), False),
        ("gpu_equivalents.svg", "GPU-equivalents (of G)", geq, True),
    ]
    # A column per model, a row per its batch sizes (smallest first); a colour per
    # strategy, dashed with background.
    models = sorted({m for m, _ in groups})
    rows = max(sum(1 for m, _ in groups if m == model) for model in models)
    where = {}
    for model in models:
        for i, key in enumerate(sorted(k for k in groups if k[0] == model)):
            where[key] = (i, models.index(model))
    colour = {"dp": "C0", "deeppool": "C1", "pow2": "C2", "burst": "C3"}
    for fname, ylabel, value, logy in metrics:
        fig, axes = plt.subplots(rows, len(models), figsize=(4.6 * len(models), 3.5 * rows), squeeze=False)
        for ax in axes.flat:
            ax.set_visible(False)
        for (model, batch), rs in groups.items():
            ax = axes[where[(model, batch)]]
            ax.set_visible(True)
            series = collections.defaultdict(list)
            for r in rs:
                v = value(r)
                if v is not None:
                    series[label(r)].append((r["gpus"], v))
            for lab in sorted(series, key=label_key):
                pts = sorted(series[lab])
                base = lab.split(" + ")[0]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=lab,
                        color=colour.get(base), linestyle="--" if " + " in lab else "-")
            ax.set_xscale("log", base=2)
            if logy:
                ax.set_yscale("log")
            ax.set_title("%s, batch %d" % (model, batch))
            ax.set_xlabel("GPUs")
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.text(0.01, 0.01, "simulated (burstc sim)", fontsize=7, alpha=0.7)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, fname))
        plt.close(fig)

    # The summary: a row per (model, batch, GPUs), a cell per strategy (and background).
    labels = sorted({label(r) for r in runs}, key=label_key)
    by = {(r["model"], r["batch"], r["gpus"], label(r)): r for r in runs}
    pairs = [(b, d) for b, d in (("burst", "deeppool"), ("burst + background", "deeppool + background"))
             if b in labels and d in labels]
    print("| model | batch | GPUs | " + " | ".join(labels) + "".join(" | %s / %s" % p for p in pairs) + " |")
    print("|---|---|---|" + "---|" * (len(labels) + len(pairs)))
    for (model, batch), rs in groups.items():
        for gpus in sorted({r["gpus"] for r in rs}):
            cells = []
            for lab in labels:
                r = by.get((model, batch, gpus, lab))
                if not r:
                    cells.append("-")
                    continue
                v = norm(r)
                cells.append("%.2f ms, %s, %s, %.1f%%" % (
                    r["mean_s"] * 1e3, "%.2fx" % v if v else "-", fmt_geq(r),
                    100 * (r["gpu_busy"]["fg_mean"] + r["gpu_busy"]["bg_mean"])))
            for b, d in pairs:
                rb, rd = by.get((model, batch, gpus, b)), by.get((model, batch, gpus, d))
                if not (rb and rd):
                    cells.append("-")
                    continue
                cell = "%.2fx" % (rb["cluster_samples_per_s"] / rd["cluster_samples_per_s"])
                if geq(rb) and geq(rd):
                    cell += ", %.2fx" % (geq(rb) / geq(rd))
                cells.append(cell)
            print("| %s | %d | %d | %s |" % (model, batch, gpus, " | ".join(cells)))
    print("\n(a cell: foreground iteration time (simulated mean), cluster throughput over dp's without background"
          " at the same size, GPU-equivalents (every job's samples/s over its samples/s alone on one GPU, summed),"
          " mean GPU busy % (foreground + background); last columns: burst over deeppool in cluster throughput"
          " and in GPU-equivalents)\n")

    print("| model | batch | GPUs | strategy | iter ms | fg samples/s | bg samples/s | cluster samples/s | vs dp |"
          " GPU-eq | GPU busy % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (model, batch), rs in groups.items():
        for r in sorted(rs, key=lambda r: (r["gpus"], label_key(label(r)))):
            v = norm(r)
            print("| %s | %d | %d | %s | %.3f | %.1f | %.1f | %.1f | %s | %s | %.1f |" % (
                model, batch, r["gpus"], label(r), r["mean_s"] * 1e3, r["fg_samples_per_s"],
                r["bg_samples_per_s"], r["cluster_samples_per_s"], "%.2fx" % v if v else "-",
                "%.2f" % geq(r) if geq(r) is not None else "-",
                100 * (r["gpu_busy"]["fg_mean"] + r["gpu_busy"]["bg_mean"])))
    print("\nwrote %s" % ", ".join(os.path.join(out_dir, m[0]) for m in metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
