#!/usr/bin/python3
"""The strong-scaling study (issue 13, docs/cluster.md): `burstc sim --json` for
VGG-16, WRN-101-2 and Inception-v3 at DeepPool's global batches (16, 16, 32) and
at 256, with DeepPool's A100 profiles (data/profiles/deeppool-a100/), on 8 to
1,024 A100s (8 per node, NVLink 300 GB/s inside a node, 200 Gb/s between;
tests/bench/sim/jobs/a100_1024.burst), strategies dp, deeppool and burst; then
tests/bench/sim/plot_study.py for the SVGs and the Markdown table.

Without --background every run is a single job. With --background the runs
use the jobs with `background = [resnet50 @ 32, vgg16 @ 32]` (DeepPool's
background jobs; tests/bench/sim/jobs/study_*_bg.burst): the interleave pass
packs their slices into the foreground's idle GPU time and the simulator plays
them. dp without background is always run too: it is the baseline every
throughput is normalised to. Every number is simulated; nothing is measured.

    /usr/bin/python3 tests/bench/sim/study.py OUT_DIR [--burstc build/release/tools/burstc]
        [--background] [--models vgg16,wrn101,inception] (or vgg16-bf16) [--batches paper,256]
        [--gpus 8,16,...,1024] [--strategies dp,deeppool,burst] [--iterations 20]
        [--amplification X] [--preempt-delay T]

Writes OUT_DIR/runs/*.json (one per run), OUT_DIR/*.svg and OUT_DIR/table.md,
and prints the table and the run's conditions. A run the planner refuses
(exit status 1, e.g. DeepPool's planner on Inception-v3's auxiliary branch) is
listed with its message and has no point.
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PROFILES = os.path.join(ROOT, "data/profiles/deeppool-a100")
# short name -> (job file stem, DeepPool profile, paper batch)
MODELS = {
    "vgg16": ("study_vgg16", "vggLayerGpuProfileA100.txt", 16),
    "wrn101": ("study_wrn101", "wrnLayerGpuProfileA100V2.txt", 16),
    "inception": ("study_inception", "inceptionLayerGpuProfileA100V2.txt", 32),
    # BF16 instead of TF32: a second setting, not the study's (docs/cluster.md)
    "vgg16-bf16": ("study_vgg16_bf16", "vggLayerGpuProfileA100.txt", 16),
}


def run(burstc, job, profile, gpus, batch, strategy, iterations, amplification, preempt, out):
    cmd = [burstc, "sim", "--iterations", str(iterations), "--strategy", strategy, "--gpus", str(gpus),
           "--batch", str(batch), "--profile", profile, "--json", out]
    if amplification:
        cmd += ["--amplification", amplification]
    if preempt:
        cmd += ["--preempt-delay", preempt]
    cmd.append(job)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode == 1:  # the planner refused (its message names why): no point, said so
        msg = next((ln for ln in p.stderr.splitlines() if "error:" in ln), p.stderr.strip())
        return time.perf_counter() - t0, msg.split("error: ", 1)[-1]
    if p.returncode != 0:
        raise SystemExit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr))
    return time.perf_counter() - t0, None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--burstc", default=os.path.join(ROOT, "build/release/tools/burstc"))
    ap.add_argument("--background", action="store_true")
    ap.add_argument("--models", default="vgg16,wrn101,inception")
    ap.add_argument("--batches", default="paper,256")
    ap.add_argument("--gpus", default="8,16,32,64,128,256,512,1024")
    ap.add_argument("--strategies", default="dp,deeppool,burst")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--amplification", default="", help="default: the job's (auto)")
    ap.add_argument("--preempt-delay", default="", help="burstc sim's --preempt-delay (default: none, "
                    "the non-preemptive sharing model)")
    a = ap.parse_args()
    runs_dir = os.path.join(a.out, "runs")
    os.makedirs(runs_dir, exist_ok=True)
    print("burstc sim, study cluster tests/bench/sim/jobs/a100_1024.burst, %d iterations, DeepPool A100 profiles,"
          " amplification %s, background %s%s" % (a.iterations, a.amplification or "the job's (auto)",
                                                   "ResNet-50 @ 32 + VGG-16 @ 32" if a.background else "none",
                                                   ", preemption delay " + a.preempt_delay
                                                   if a.preempt_delay else ""),
          flush=True)
    files, refusals, wall = [], [], 0.0
    for m in a.models.split(","):
        stem, prof, paper = MODELS[m]
        prof = os.path.join(PROFILES, prof)
        for bs in a.batches.split(","):
            batch = paper if bs == "paper" else int(bs)
            for gpus in (int(g) for g in a.gpus.split(",")):
                for strategy in a.strategies.split(","):
                    variants = [False, True] if a.background else [False]
                    if strategy != "dp" and a.background:
                        variants = [True]
                    for bg in variants:
                        job = os.path.join(HERE, "jobs", stem + ("_bg" if bg else "") + ".burst")
                        out = os.path.join(runs_dir, "%s_b%d_g%d_%s%s.json" % (m, batch, gpus, strategy,
                                                                              "_bg" if bg else ""))
                        t, refused = run(a.burstc, job, prof, gpus, batch, strategy, a.iterations,
                                         a.amplification, a.preempt_delay, out)
                        wall += t
                        if refused:
                            refusals.append("%s @ %d, %d GPUs, %s%s: %s" % (m, batch, gpus, strategy,
                                                                         " + background" if bg else "", refused))
                        else:
                            files.append(out)
        print("%s done (%.1f s of burstc sim so far)" % (m, wall), flush=True)
    p = subprocess.run([sys.executable, os.path.join(HERE, "plot_study.py"), a.out] + files,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("plot_study.py failed:\n" + p.stderr)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(p.stdout)
    print(p.stdout)
    if refusals:
        print("no plan (the planner's refusal, exit status 1):")
        for r in refusals:
            print("  " + r)
    print("%d runs, %d refused, %.1f s of burstc sim in all" % (len(files), len(refusals), wall))
    return 0


if __name__ == "__main__":
    sys.exit(main())
