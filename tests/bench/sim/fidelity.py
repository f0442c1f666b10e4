#!/usr/bin/python3
"""Fidelity of the cluster simulator against the CPU backend on this machine.

For the Fashion-MNIST and residual CPU jobs (examples/jobs/fmnist_cpu.burst,
resnet_small_cpu.burst) on 1, 2 and 4 ranks with the calibrated `cpu` device,
dp and burst plans: builds the real generated program (`burstc build`), trains
it under mpirun with --trace, and sets the measured iteration time (median over
the steps after the warm-up of the time between the last rank's ends of two
consecutive steps, the simulator's definition; the median of --runs runs, which
run in rounds of every plan in an order that rotates, so that no plan always runs
first after a calibration or a slow minute of the VM) next to `burstc sim`'s (mean
of 20 simulated iterations) and the planner's. Then per layer: the measured
forward+backward time of the slowest rank (mean over the measured steps)
against the cost model's (`burstc plan --json`, the largest shard), and the
same for reshards and all-reduces; with --profile the inputs' data (which the
plan charges to their first consumers' forward, its `data_s`) and the
optimizer's update (charged to the layers' backward by their parameters,
`update_s`) have rows of their own, beside their spans. Prints the load
average around every run: the machine is shared and has 2 cores, so 4 ranks
run 2 per core.

On one rank it also measures the CPU time a training step costs (two whole
runs of different lengths), which time-slicing by other processes does not
inflate, against the simulated time.

Not a test: a benchmark to rerun when the CPU kernels or the cost model change.

    /usr/bin/python3 tests/bench/sim/fidelity.py [--burstc build/release/tools/burstc]
        [--jobs fmnist_cpu,resnet_small_cpu] [--ranks 1,2,4] [--strategies dp,burst]
        [--iterations 30] [--warmup 5] [--runs 3] [--threads 1] [--layers] [--profile]

With --profile the model is calibrated on this machine at the time of the run
(`burstc profile`, before each job's rows of a rank count) instead of taken from
the cpu device's record, which was fitted to this virtual machine's speed on one
day; the one-rank CPU-time table is left out then.
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
# Open MPI yields a waiting rank's core by itself when the ranks outnumber
# the cores (4 ranks here); on 2 ranks a rank has a core and spins, as it
# would on a machine of its own: forcing mpi_yield_when_idle there hands the
# core to whatever else runs at every wait.
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def cpu_busy():
    """Seconds of CPU time the whole machine has spent busy, and our children's."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    busy = (sum(v) - v[3] - v[4]) / hz  # all but idle and iowait
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return busy, ru.ru_utime + ru.ru_stime, time.time()


def others(before, after):
    """Cores kept busy by other processes during a run (ours subtracted)."""
    wall = after[2] - before[2]
    return max(0.0, ((after[0] - before[0]) - (after[1] - before[1])) / wall) if wall > 0 else 0.0


def with_profile(cmd, profile):
    return cmd + ["--profile", profile] if profile else cmd


def calibrate(burstc, job, ranks, tmp):
    """--profile: the job's profile measured now (`burstc profile --concurrent C
    --data job`, C = the ranks that compute at once: min(ranks, CPUs); on the job's
    own data, which the measured programs read); its path."""
    prof = os.path.join(tmp, "calibration.profile")
    subprocess.run([burstc, "profile", job, "-o", prof, "--concurrent",
                    str(min(ranks, os.cpu_count())), "--data", "job"], check=True,
                   capture_output=True, env=ENV)
    return prof


def build(burstc, job, ranks, strategy, tmp, profile=None):
    """The generated program of the plan; its path."""
    prog = os.path.join(tmp, "prog_%s" % strategy)
    subprocess.run(with_profile([burstc, "build", "--gpus", str(ranks), "--strategy", strategy, job,
                                 "-o", prog], profile), check=True, capture_output=True)
    return prog


def measure(prog, ranks, iters, warmup, threads, tmp):
    """Measured iteration time (s) and per-name seconds per step (slowest rank)."""
    trace = os.path.join(tmp, "trace.json")
    cmd = ["mpirun", "--oversubscribe", "-np", str(ranks), prog, "--iterations", str(iters),
           "--threads", str(threads), "--trace", trace]
    subprocess.run(cmd, check=True, capture_output=True, env=ENV)
    events = [e for e in json.load(open(trace))["traceEvents"] if e.get("ph") == "X"]
    steps = {}  # rank -> [(start, end)] in order
    for e in events:
        if e["name"] == "iteration":
            steps.setdefault(e["pid"], []).append((e["ts"] * 1e-6, (e["ts"] + e["dur"]) * 1e-6))
    for r in steps:
        steps[r].sort()
    n = min(len(s) for s in steps.values())
    ends = [max(steps[r][i][1] for r in steps) for i in range(n)]
    periods = [ends[i] - ends[i - 1] for i in range(max(warmup, 1), n)]
    # per name and rank: time inside the measured steps
    per = {}
    for e in events:
        if e["name"] == "iteration":
            continue
        r = e["pid"]
        lo, hi = steps[r][max(warmup, 1)][0], steps[r][n - 1][1]
        t = e["ts"] * 1e-6
        if lo <= t <= hi:
            per.setdefault(e["name"], {}).setdefault(r, 0.0)
            per[e["name"]][r] += e["dur"] * 1e-6
    counted = n - max(warmup, 1)
    per = {k: max(v.values()) / counted for k, v in per.items()}
    return statistics.median(periods), per


def predict(burstc, job, ranks, strategy, tmp, profile=None):
    out = os.path.join(tmp, "sim.json")
    subprocess.run(with_profile([burstc, "sim", "--gpus", str(ranks), "--strategy", strategy, "--json",
                                 out, job], profile), check=True, capture_output=True)
    sim = json.load(open(out))
    out = os.path.join(tmp, "plan.json")
    subprocess.run(with_profile([burstc, "plan", "--gpus", str(ranks), "--strategy", strategy, "--json",
                                 out, job], profile), check=True, capture_output=True)
    plan = next(p for p in json.load(open(out))["plans"] if p["strategy"] == strategy)
    return sim, plan


def profile_inputs(prof):
    """The names of the inputs a profile measured (its `op":"input"` lines)."""
    if not prof:
        return []
    names = set()
    for line in open(prof):
        m = re.match(r'layer\{"name":"([^"]*)","op":"input"\}', line)
        if m:
            names.add(m.group(1))
    return sorted(names)


def layer_rows(plan, measured, inputs=()):
    """(name, measured s, predicted s) per layer, reshard and all-reduce. A measured
    profile charges its inputs' data to the forward of the layer that consumes each
    first (the plan's data_s) and the optimizer's update to the layers' backward by
    their parameters (update_s); those are taken out of the layer's row and set
    beside the inputs' and the update's own spans in rows of their own."""
    rows = []
    data = update = 0.0
    for l in plan["layers"]:
        m = measured.get(l["name"], 0.0) + measured.get(l["name"] + ".bwd", 0.0)
        d, u = l.get("data_s", 0.0), l.get("update_s", 0.0)
        data += d
        update += u
        rows.append((l["name"], m, l["fwd_s"] + l["bwd_s"] - d - u))
        if l["allreduce_s"] > 0:
            rows.append((l["name"] + ".allreduce", measured.get(l["name"] + ".allreduce", 0.0),
                         l["allreduce_s"]))
        if l["reshard_s"] > 0:
            m = sum(v for k, v in measured.items() if k.endswith(".to." + l["name"]) or
                    k.endswith(".to." + l["name"] + ".bwd"))
            rows.append(("reshard into " + l["name"], m, l["reshard_s"]))
    if data > 0:
        rows.append(("inputs' data (%s)" % ", ".join(inputs),
                     sum(measured.get(x, 0.0) for x in inputs), data))
    if update > 0:
        rows.append(("optimizer's update", measured.get("optimizer.step", 0.0), update))
    return rows


def cpu_per_step(burstc, job, strategy, short, long, threads, tmp):
    """One rank: CPU seconds per training step, from the CPU time of two whole
    runs of different lengths (the difference divided by the extra steps, so
    start-up, data loading and warm-up cancel). Time-slicing by other
    processes does not count as CPU time; their use of caches and memory
    bandwidth still does."""
    prog = os.path.join(tmp, "prog1")
    subprocess.run([burstc, "build", "--gpus", "1", "--strategy", strategy, job, "-o", prog],
                   check=True, capture_output=True)
    cpu = []
    for n in (short, long):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(["mpirun", "-np", "1", prog, "--iterations", str(n), "--threads", str(threads)],
                       check=True, capture_output=True, env=ENV)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return (cpu[1] - cpu[0]) / (long - short)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", default=os.path.join(ROOT, "build/release/tools/burstc"))
    ap.add_argument("--jobs", default="fmnist_cpu,resnet_small_cpu")
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--strategies", default="dp,burst")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1,
                    help="threads per rank (default 1: the cpu device is one core per rank)")
    ap.add_argument("--runs", type=int, default=3,
                    help="runs of every row (default 3): after each calibration the rows of a job and"
                    " rank count run in rounds, every plan once a round in an order that rotates; a row"
                    " is the median of its runs (measured time and every per-layer span)")
    ap.add_argument("--layers", action="store_true", help="print the per-layer tables too")
    ap.add_argument("--profile", action="store_true",
                    help="calibrate on this machine now: before each job's rows of a rank count,"
                    " measure its profile (burstc profile --concurrent min(ranks, CPUs) --data job) and plan,"
                    " build and simulate with it, instead of the cpu device's fixed record")
    a = ap.parse_args()
    print("simulated (burstc sim, %s) vs measured (the generated program under mpirun, median of %d"
          " steps after %d of warm-up; the median of %d runs in rotating order)" % (
              "a profile measured just before each job's rows of a rank count" if a.profile else
              "cpu device of examples/clusters/cpu.burst", a.iterations - a.warmup, a.warmup, a.runs))
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    print("machine: %d CPUs (%s); %d thread(s) per rank; load average at start %s" % (
        os.cpu_count(), model, a.threads, " ".join("%.2f" % x for x in os.getloadavg())))
    print("(others: cores other processes kept busy during the row's runs (the most of them), from /proc/stat"
          " minus our own children)")
    print("(layers: the measured forward+backward of every layer, slowest rank each, summed; model: the same"
          " in the cost model;\n scaled: the simulated time x layers / model, what the simulator would say with"
          " the compute the program measured)")
    print("%-18s %5s %-6s %11s %11s %11s %8s %8s %10s %10s %10s %8s %7s" % (
        "job", "ranks", "plan", "measured ms", "sim ms", "planner ms", "sim/meas", "plan/meas", "layers ms",
        "model ms", "scaled ms", "sc/meas", "others"))
    details = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.jobs.split(","):
            job = os.path.join(ROOT, "examples/jobs/%s.burst" % name)
            for ranks in (int(x) for x in a.ranks.split(",")):
                prof = calibrate(a.burstc, job, ranks, tmp) if a.profile else None
                strategies = a.strategies.split(",")
                progs = {st: build(a.burstc, job, ranks, st, tmp, prof) for st in strategies}
                runs = {st: [] for st in strategies}  # (measured s, per-name s, others' cores)
                for r in range(max(a.runs, 1)):
                    k = r % len(strategies)
                    for strategy in strategies[k:] + strategies[:k]:
                        before = cpu_busy()
                        m, per = measure(progs[strategy], ranks, a.iterations, a.warmup, a.threads, tmp)
                        runs[strategy].append((m, per, others(before, cpu_busy())))
                for strategy in strategies:
                    measured = statistics.median(m for m, _, _ in runs[strategy])
                    names = set().union(*(per for _, per, _ in runs[strategy]))
                    per = {n: statistics.median(p.get(n, 0.0) for _, p, _ in runs[strategy])
                           for n in names}
                    load = max(o for _, _, o in runs[strategy])
                    sim, plan = predict(a.burstc, job, ranks, strategy, tmp, prof)
                    rows = layer_rows(plan, per, profile_inputs(prof))
                    compute = [r for r in rows if not r[0].endswith(".allreduce") and
                               not r[0].startswith("reshard into ")]
                    mlayers, player = sum(r[1] for r in compute), sum(r[2] for r in compute)
                    scaled = sim["mean_s"] * mlayers / player if player > 0 else 0
                    print("%-18s %5d %-6s %11.3f %11.3f %11.3f %8.2f %8.2f %10.3f %10.3f %10.3f %8.2f %7.2f" %
                          (name, ranks, strategy, 1e3 * measured, 1e3 * sim["mean_s"], 1e3 * sim["planner_s"],
                           sim["mean_s"] / measured, sim["planner_s"] / measured, 1e3 * mlayers, 1e3 * player,
                           1e3 * scaled, scaled / measured, load),
                          flush=True)
                    details.append((name, ranks, strategy, rows))
    if "1" in a.ranks.split(",") and not a.profile:
        print()
        print("one rank, CPU time per step (CPU time of a %d-step run minus a %d-step run, over the difference;"
              " median of 3)" % (a.iterations + 30, a.iterations))
        print("%-18s %-6s %11s %11s %9s %7s" % ("job", "plan", "CPU ms", "sim ms", "sim/CPU", "others"))
        with tempfile.TemporaryDirectory() as tmp:
            for name in a.jobs.split(","):
                job = os.path.join(ROOT, "examples/jobs/%s.burst" % name)
                before = cpu_busy()
                c = statistics.median(cpu_per_step(a.burstc, job, "dp", a.iterations, a.iterations + 30,
                                                   a.threads, tmp) for _ in range(3))
                load = others(before, cpu_busy())
                sim, _ = predict(a.burstc, job, 1, "dp", tmp)
                print("%-18s %-6s %11.3f %11.3f %9.2f %7.2f" % (name, "dp", 1e3 * c, 1e3 * sim["mean_s"],
                                                               sim["mean_s"] / c, load), flush=True)
    print("load average at end %s" % " ".join("%.2f" % x for x in os.getloadavg()))
    if a.layers:
        for name, ranks, strategy, rows in details:
            print()
            print("%s, %d ranks, %s: per layer, slowest rank, ms per step" % (name, ranks, strategy))
            print("%-28s %11s %11s %8s" % ("layer", "measured", "model", "ratio"))
            for lname, m, p in rows:
                print("%-28s %11.3f %11.3f %8s" % (lname, 1e3 * m, 1e3 * p, "%.2f" % (p / m) if m > 0 else "-"))


if __name__ == "__main__":
    main()
