#!/usr/bin/python3
"""DeepPool's own comparison in burstc's terms (issue 37, docs/cluster.md, "The
paper's setting"): 1, 2, 4 and 8 A100s on one node, VGG-16 and WRN-101-2 @ 16,
Inception-v3 @ 32 (DeepPool's A100 profiles), TF32, with DeepPool's background
jobs ResNet-50 @ 32 and VGG-16 @ 32 (tests/bench/sim/jobs/study_*_bg.burst,
amplification = auto, slowdown 1.1). dp without background against deeppool +
mux and burst + mux, each strategy's plan its own auto choice under the one
limit, in both measures: DeepPool's (cluster samples/s, foreground +
background, over dp's) and gpu_equivalents (every job's samples/s over its
samples/s alone on one GPU, summed: work in dedicated GPUs, at most G).

Predictions of `burstc plan --json` (the interleave pass's), not simulated
and not measured; the simulated cluster throughput of the same cells is
tests/bench/sim/study.py OUT --background --gpus 1,2,4,8 --batches paper.

    /usr/bin/python3 tests/bench/sim/paper_setting.py [--burstc build/release/tools/burstc]
        [--preempt-delay T]

Prints a Markdown table and the conditions.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PROFILES = os.path.join(ROOT, "data/profiles/deeppool-a100")
MODELS = [("VGG-16", "study_vgg16_bg", "vggLayerGpuProfileA100.txt", 16),
          ("WRN-101-2", "study_wrn101_bg", "wrnLayerGpuProfileA100V2.txt", 16),
          ("Inception-v3", "study_inception_bg", "inceptionLayerGpuProfileA100V2.txt", 32)]
GPUS = [1, 2, 4, 8]


def plan(burstc, job, profile, gpus, batch, preempt):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "plan.json")
        cmd = [burstc, "plan", "--gpus", str(gpus), "--batch", str(batch), "--profile", profile,
               "--json", out]
        if preempt:
            cmd += ["--preempt-delay", preempt]
        cmd.append(job)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr))
        with open(out) as f:
            return {x["strategy"]: x for x in json.load(f)["plans"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", default=os.path.join(ROOT, "build/release/tools/burstc"))
    ap.add_argument("--preempt-delay", default="", help="burstc's --preempt-delay (default: none)")
    a = ap.parse_args()
    t0 = time.perf_counter()
    print("burstc plan --json, one node of A100s (tests/bench/sim/jobs/a100_1024.burst), DeepPool A100 "
          "profiles, background ResNet-50 @ 32 + VGG-16 @ 32, amplification auto, slowdown 1.1%s\n"
          % (", preempt delay " + a.preempt_delay if a.preempt_delay else ""))
    print("| model | batch | GPUs | dp samples/s | dp gpu-eq | deeppool + mux | burst + mux "
          "| burst + mux / deeppool + mux | burst's plan |")
    print("|---|---|---|---|---|---|---|---|---|")
    for title, stem, prof, batch in MODELS:
        job = os.path.join(HERE, "jobs", stem + ".burst")
        one = None
        for g in GPUS:
            ps = plan(a.burstc, job, os.path.join(PROFILES, prof), g, batch, a.preempt_delay)
            dp = ps["dp"]["mux"]
            dp_sps = batch / dp["fg_time_s"]  # without background: its timeline
            if g == 1:
                one = dp["gpu_equivalents"] * dp["fg_time_s"]  # the one-GPU time
            dp_geq = one / dp["fg_time_s"]

            def cell(s):
                if s not in ps:
                    return "-", None, None
                m = ps[s]["mux"]
                x = m["cluster_samples_per_s"] / dp_sps
                return "%.2fx, %.2f GPU-eq (%d copies)" % (x, m["gpu_equivalents"], m["copies"]), x, \
                    m["gpu_equivalents"]

            dpc, dx, dg = cell("deeppool")
            bc, bx, bg = cell("burst")
            ratio = "%.2fx, %.2fx" % (bx / dx, bg / dg) if dx else "-"
            print("| %s | %d | %d | %.1f | %.2f | %s | %s | %s | %.4f ms |"
                  % (title, batch, g, dp_sps, dp_geq, dpc, bc, ratio, ps["burst"]["time_s"] * 1e3))
    print("\n(deeppool + mux, burst + mux: cluster samples/s over dp's without background, "
          "gpu_equivalents, copies placed; each strategy's plan its own auto choice under one limit, "
          "1.1 x the fastest plan of any strategy; last column: burst's plan's iteration time; "
          "'-': DeepPool's planner cannot search the graph; %.1f s)" % (time.perf_counter() - t0))


if __name__ == "__main__":
    sys.exit(main())
