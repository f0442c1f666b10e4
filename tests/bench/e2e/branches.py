#!/usr/bin/python3
"""Concurrent branches on disjoint ranks, split-phase against blocking resharding, on
the CPU backend: tests/e2e/hand_plan_branches.ir (the residual network on 4 ranks; the
two-path block's 3x3 branch on ranks 0-1, its 5x5 branch on 2-3, joined by a concat on
all four).

Builds the plan twice: as the schedule says (the default: each reshard started right
after its producer, waited for right before its consumer, so the fork's ranks send both
branches their inputs before they run either) and with --blocking-reshard (each reshard
one blocking exchange at its place in graph order: ranks 2-3 receive their input only
after ranks 0-1 ran the 3x3 branch). Runs them alternately ROUNDS times each for WARMUP
+ STEPS steps under --trace. Per run: the median iteration time of rank 0 (from its
trace's iteration regions). Both programs' losses must equal the one-rank run of the same model (rtol 1e-4, as the
e2e tests), and each other's bit for bit (the same sums in the same order).

From the same Chrome traces (one clock for all ranks: rank 0's, broadcast at start),
per measured step: how long the two branches' compute (the 3x3 branch's conv, batch
norm and ReLU on ranks 0-1, the 5x5 branch's on ranks 2-3) runs at the same time,
forward and backward, as the overlap of the two branches' busy intervals. The
split-phase program must show the forward branches overlapping on distinct ranks in
most measured steps (not every one: on 2 busy cores a rank may be descheduled for a
whole branch; 91 of 100 at load 14-21). The blocking one overlaps less: rank 2's input comes from ranks
0-1, who send it only after their branch, but rank 3's (samples 16-31) is its own and
rank 2's shard, so rank 3 may start early. --trace FILE keeps the last split-phase run's trace there (and the
blocking one's beside it, FILE less .json plus .blocking.json), to open in
chrome://tracing or Perfetto: ranks 0-1 and 2-3 run their branches side by side.

With --ranks 2 the same model runs on 2 ranks, the 3x3 branch on rank 0 and the 5x5 on
rank 1 (the plan is rewritten from the 4-rank one): on a 2-core machine a core per rank,
so the branches can really run at once.

    /usr/bin/python3 tests/bench/e2e/branches.py [--burstc build/release/tools/burstc]
        [--rounds 5] [--steps 30] [--warmup 5] [--ranks 4|2] [--trace FILE]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PLAN = os.path.join(ROOT, "tests/e2e/hand_plan_branches.ir")
sys.path.insert(0, os.path.join(ROOT, "tests/e2e"))
from losses_match import unplanned  # noqa: E402

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1")


def mpirun(np, prog, args):
    p = subprocess.run(["mpirun", "-np", str(np), "--oversubscribe", "--bind-to", "none", prog] + args,
                       capture_output=True, text=True, env=ENV, timeout=1200)
    if p.returncode != 0:
        raise SystemExit("failed (%d): %s\n%s%s" % (p.returncode, prog, p.stdout, p.stderr))
    return p.stdout


def losses(out):
    return [float(m.group(1)) for m in re.finditer(r"^step \d+ loss (\S+)$", out, re.M)]


# The branches' layers and ranks, by the plan's rank count.
BRANCH = {4: {"mix.p3": (0, 1), "mix.p5": (2, 3)}, 2: {"mix.p3": (0,), "mix.p5": (1,)}}
BRANCH_OPS = (".conv", ".bn", "")


def two_rank_plan(text):
    """hand_plan_branches.ir on 2 ranks: the 3x3 branch on rank 0, the 5x5 on rank 1, the
    rest (and the head, which the 4-rank plan puts on 1-3) on both."""
    for a, b in (("@[0..1]", "@[0]"), ("@[2..3]", "@[1]"), ("@[1..3]", "@[0..1]"),
                 ("@[0..3]", "@[0..1]"), ("gpus_per_node = 4", "gpus_per_node = 2")):
        text = text.replace(a, b)
    return text


def union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def overlap(x, y):
    """Time (us) in both of two sorted lists of disjoint intervals."""
    t, i, j = 0.0, 0, 0
    while i < len(x) and j < len(y):
        t += max(0.0, min(x[i][1], y[j][1]) - max(x[i][0], y[j][0]))
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return t


def branch_overlap(events, warmup, np):
    """Per measured step: (forward, backward) ms in which both branches compute."""
    its = {g: sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                     if e.get("ph") == "X" and e.get("pid") == g and e["name"] == "iteration")
           for g in range(np)}
    n = min(len(v) for v in its.values())
    res = []
    for i in range(warmup, n):
        both = []
        for suffix in ("", ".bwd"):
            busy = []
            for layer, ranks in BRANCH[np].items():
                names = {layer + op + suffix for op in BRANCH_OPS}
                busy.append(union([(e["ts"], e["ts"] + e["dur"]) for e in events
                                   if e.get("ph") == "X" and e["name"] in names and e["pid"] in ranks
                                   and its[e["pid"]][i][0] <= e["ts"] <= its[e["pid"]][i][1]]))
            both.append(overlap(busy[0], busy[1]) / 1e3)
        res.append(tuple(both))
    return res


def run(np, prog, steps, warmup, tmp, keep=None):
    trace = os.path.join(tmp, "trace.json")
    out = mpirun(np, prog, ["--iterations", str(steps + warmup), "--data", "synthetic", "--trace", trace])
    events = json.load(open(trace))["traceEvents"]
    if keep:
        shutil.copyfile(trace, keep + ".tmp")
        os.replace(keep + ".tmp", keep)
    its = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                 if e.get("ph") == "X" and e.get("pid") == 0 and e["name"] == "iteration")
    return statistics.median((b - a) / 1e3 for a, b in its[warmup:]), losses(out), \
        branch_overlap(events, warmup, np)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", default=os.path.join(ROOT, "build/release/tools/burstc"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--trace", help="keep the last split-phase run's Chrome trace here")
    ap.add_argument("--ranks", type=int, choices=(2, 4), default=4,
                    help="the plan's ranks: 4 (each branch on 2 ranks) or 2 (each on one rank: "
                    "on a 2-core machine, a core per rank)")
    a = ap.parse_args()
    keep = {}
    if a.trace:
        stem = a.trace[:-5] if a.trace.endswith(".json") else a.trace
        keep = {"split-phase": a.trace, "blocking": stem + ".blocking.json"}
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        progs = {"split-phase": os.path.join(tmp, "split"), "blocking": os.path.join(tmp, "blocking")}
        with open(PLAN) as f:
            text = f.read()
        plan = PLAN
        if a.ranks == 2:
            plan = os.path.join(tmp, "hand_plan_branches2.ir")
            with open(plan, "w") as o:
                o.write(two_rank_plan(text))
        for mode, prog in progs.items():
            extra = ["--blocking-reshard"] if mode == "blocking" else []
            subprocess.run([a.burstc, "build"] + extra + [plan, "-o", prog], check=True, capture_output=True)
        ref_ir, ref = os.path.join(tmp, "unplanned.ir"), os.path.join(tmp, "ref")
        with open(ref_ir, "w") as o:
            o.write(unplanned(text))
        subprocess.run([a.burstc, "build", "--strategy", "dp", "--gpus", "1", ref_ir, "-o", ref],
                       check=True, capture_output=True)
        want = losses(mpirun(1, ref, ["--iterations", str(a.steps + a.warmup), "--data", "synthetic"]))
        res = {m: [] for m in progs}
        for r in range(a.rounds):
            for mode in (list(progs) if r % 2 == 0 else list(progs)[::-1]):
                last = r >= a.rounds - 2
                res[mode].append(run(a.ranks, progs[mode], a.steps, a.warmup, tmp, keep.get(mode) if last else None))
    worst = 0.0
    for mode in res:
        for _, got, _ in res[mode]:
            if len(got) != len(want):
                raise SystemExit("%s: %d losses, %d on one rank" % (mode, len(got), len(want)))
            for g, w in zip(got, want):
                worst = max(worst, abs(g - w) / max(abs(w), 1e-30))
    if worst > 1e-4:
        raise SystemExit("losses differ from the one-rank run: worst relative difference %.3g" % worst)
    bitwise = all(x[1] == res["split-phase"][0][1] for m in res for x in res[m])
    print("hand_plan_branches.ir on %d CPU ranks, %d steps after %d of warm-up, median of %d runs each "
          "(alternating); load average %.1f at start, %.1f at end"
          % (a.ranks, a.steps, a.warmup, a.rounds, load[0], os.getloadavg()[0]))
    print("%-12s %14s %22s %22s   %s" % ("resharding", "iteration ms", "branches side by side",
                                           "(fwd ms, bwd ms)", "runs (iteration ms)"))
    for mode in ("blocking", "split-phase"):
        ov = [o for x in res[mode] for o in x[2]]
        steps_fwd = sum(1 for f, _ in ov if f > 0)
        print("%-12s %14.2f %13d/%d steps %11.2f %9.2f   %s" % (
            mode, statistics.median(x[0] for x in res[mode]), steps_fwd, len(ov),
            statistics.median(f for f, _ in ov), statistics.median(b for _, b in ov),
            " ".join("%.1f" % x[0] for x in res[mode])))
    ov = [o for x in res["split-phase"] for o in x[2]]
    if not ov or 2 * sum(1 for f, _ in ov if f > 0) <= len(ov):
        raise SystemExit("split-phase: the forward branches overlapped on distinct ranks in only %d of %d "
                         "steps" % (sum(1 for f, _ in ov if f > 0), len(ov)))
    if a.trace:
        print("traces: %s (split-phase), %s (blocking)" % (keep["split-phase"], keep["blocking"]))
    b = statistics.median(x[0] for x in res["blocking"])
    s = statistics.median(x[0] for x in res["split-phase"])
    print("split-phase / blocking: %.3fx the iteration time; losses equal the one-rank run (worst "
          "relative difference %.3g)%s" % (s / b, worst, "; both programs' losses bit for bit equal"
                                           if bitwise else "; the two programs' losses differ in the last bits"))


if __name__ == "__main__":
    main()
