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

and prints the numbers as a Markdown table (the study's table). The runs
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

    metrics = [
        ("cluster_throughput.svg", "cluster throughput / dp", norm, False),
        ("iteration_time.svg", "foreground iteration (ms)", lambda r: r["mean_s"] * 1e3, True),
        ("utilisation.svg", "GPU busy % (fg + bg)",
         lambda r: 100 * (r["gpu_busy"]["fg_mean"] + r["gpu_busy"]["bg_mean"]), False),
    ]
    n = len(groups)
    for fname, ylabel, value, logy in metrics:
        fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.6), squeeze=False)
        for ax, ((model, batch), rs) in zip(axes[0], groups.items()):
            series = collections.defaultdict(list)
            for r in rs:
                v = value(r)
                if v is not None:
                    series[label(r)].append((r["gpus"], v))
            for lab in sorted(series, key=label_key):
                pts = sorted(series[lab])
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=lab)
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

    print("| model | batch | GPUs | strategy | iter ms | fg samples/s | bg samples/s | cluster samples/s | vs dp | GPU busy % |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (model, batch), rs in groups.items():
        for r in sorted(rs, key=lambda r: (r["gpus"], label_key(label(r)))):
            v = norm(r)
            print("| %s | %d | %d | %s | %.3f | %.1f | %.1f | %.1f | %s | %.1f |" % (
                model, batch, r["gpus"], label(r), r["mean_s"] * 1e3, r["fg_samples_per_s"],
                r["bg_samples_per_s"], r["cluster_samples_per_s"], "%.2fx" % v if v else "-",
                100 * (r["gpu_busy"]["fg_mean"] + r["gpu_busy"]["bg_mean"])))
    print("\nwrote %s" % ", ".join(os.path.join(out_dir, m[0]) for m in metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
