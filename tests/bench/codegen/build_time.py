#!/usr/bin/env python3
"""`burstc build` through C against through LLVM: wall time to a linked
program, the size of what each generates, and the training throughput of
the two programs.

Every build is a whole cold `burstc build` process, as a user runs it: the
front end, the planner and code generation, then for --codegen=c the MPI C
compiler (mpicc -O2) on the generated C and the link, for --codegen=llvm
LLVM's object code and the same link. The two code generators are run in
alternation, R times each, and the table shows the medians. Throughput: the
Fashion-MNIST job on 4 ranks, both programs alternately, the median of the
samples/s that each run prints.

    python3 tests/bench/codegen/build_time.py [--burstc build/release/tools/burstc]
        [--runs 5] [--levels 0,2] [--train-runs 5] [--iterations 200]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

JOBS = [  # name, file, burstc options
    ("fmnist (4 ranks)", "examples/jobs/fmnist_cpu.burst", []),
    ("ResNet-50 (8 GPUs)", "examples/jobs/resnet50_a100_64.burst", ["--gpus", "8"]),
    ("GPT-2 XL (8 GPUs)", "examples/jobs/gpt2_xl_h200.burst", ["--gpus", "8"]),
]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, **kw)
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr))
    return p.stdout


def timed(cmd):
    t0 = time.perf_counter()
    run(cmd)
    return time.perf_counter() - t0


def size(burstc, job, opts, emit, tmp):
    out = os.path.join(tmp, "emitted")
    run([burstc, "build", "--emit=" + emit] + opts + [job, "-o", out])
    return os.path.getsize(out)


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", default="build/release/tools/burstc")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--levels", default="0,2", help="LLVM -O levels to time (the first is the default's)")
    ap.add_argument("--train-runs", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--data", default="fmnist")
    ap.add_argument("--skip-train", action="store_true")
    a = ap.parse_args()
    levels = [int(x) for x in a.levels.split(",")]
    print("machine: %d CPUs; load average before: %s" % (os.cpu_count(), load()))
    print("builds: whole cold `burstc build` processes, median of %d, C and LLVM alternating\n" % a.runs)
    head = "| job | C: mpicc -O2 (s) | " + " | ".join("LLVM -O%d (s) | C / LLVM -O%d" % (l, l) for l in levels)
    head += " | C source | LLVM IR (-O%d) | object (-O%d) |" % (levels[0], levels[0])
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "prog")
        for name, job, opts in JOBS:
            times = {"c": []}
            times.update({l: [] for l in levels})
            for _ in range(a.runs):
                times["c"].append(timed([a.burstc, "build", "--codegen=c"] + opts + [job, "-o", prog]))
                for l in levels:
                    times[l].append(timed([a.burstc, "build", "--codegen=llvm", "-O%d" % l] + opts +
                                          [job, "-o", prog]))
            c = statistics.median(times["c"])
            row = "| %s | %.2f | " % (name, c)
            row += " | ".join("%.2f | %.1fx" % (statistics.median(times[l]), c / statistics.median(times[l]))
                              for l in levels)
            lv = ["-O%d" % levels[0]]
            row += " | %.0f KB | %.0f KB | %.0f KB |" % (
                size(a.burstc, job, opts, "c", tmp) / 1024,
                size(a.burstc, job, opts + lv, "llvm", tmp) / 1024,
                size(a.burstc, job, opts + lv, "obj", tmp) / 1024)
            print(row, flush=True)
        print("\nload average after the builds: %s" % load())
        if a.skip_train:
            return
        job = JOBS[0][1]
        progs = {"C (mpicc -O2)": os.path.join(tmp, "prog_c")}
        run([a.burstc, "build", "--codegen=c", job, "-o", progs["C (mpicc -O2)"]])
        for l in levels:
            progs["LLVM -O%d" % l] = os.path.join(tmp, "prog_llvm%d" % l)
            run([a.burstc, "build", "--codegen=llvm", "-O%d" % l, job, "-o", progs["LLVM -O%d" % l]])
        rates = {k: [] for k in progs}
        for _ in range(a.train_runs):
            for k, p in progs.items():
                out = run(["mpirun", "-np", "4", "--oversubscribe", p, "--iterations", str(a.iterations),
                           "--data", a.data])
                m = re.search(r"^throughput ([0-9.]+) samples/s", out, re.M)
                if not m:
                    sys.exit("no throughput in the output of %s:\n%s" % (k, out))
                rates[k].append(float(m.group(1)))
        base = statistics.median(rates["C (mpicc -O2)"])
        print("\ntraining: %s on 4 ranks, %d iterations of data %s, median of %d runs (alternating)\n"
              % (JOBS[0][0].split()[0], a.iterations, a.data, a.train_runs))
        print("| program | samples/s (median) | min .. max | against C |")
        print("| --- | --- | --- | --- |")
        for k, r in rates.items():
            med = statistics.median(r)
            print("| %s | %.1f | %.1f .. %.1f | %.3f |" % (k, med, min(r), max(r), med / base))
        print("\nload average after training: %s" % load())


if __name__ == "__main__":
    main()
