#!/usr/bin/env python3
"""Training throughput of burstc's generated programs against PyTorch 1.13 on the CPU,
the same networks, batches, optimizers and thread counts, in one interleaved run.

Networks: the Fashion-MNIST CNN (examples/jobs/fmnist_cpu.burst, batch 64, real data) and
the small residual network (examples/jobs/resnet_small_cpu.burst, batch 32, synthetic
data); their PyTorch twins are in peer_models.py. Configurations: one process with one
thread and with two, and 2 and 4 processes of one thread each (burstc: mpirun ranks, the
data-parallel plan and the burst plan; PyTorch: DistributedDataParallel over gloo; 4
processes oversubscribe a 2-core machine, as the job's cluster of four CPU ranks does).

PyTorch runs in two regimes, both reported:
  as-is   every thread variable (OMP, MKL, OpenBLAS, ...) set before torch is imported, and
          torch.set_num_threads; glibc's default malloc;
  tuned   the same with GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:
          glibc.malloc.trim_threshold=17179869184, which keeps freed activations in the
          process instead of returning them to the kernel and faulting them in again.
The targets are set against "tuned".

Each round runs every (network, configuration) with burstc and both PyTorch regimes one
after the other, in an order that rotates from round to round; each run trains WARMUP +
STEPS steps and measures the STEPS after the warm-up (burstc: rank 0's iterations in its
--trace; PyTorch: rank 0's wall time over those steps, after a barrier). The table gives
the median samples/s over the rounds and the median of the paired ratios burstc/PyTorch
(each ratio from runs of the same round), and the load average around every round: the
machine is shared, so read the ratios, not the absolute rates.

    /usr/bin/python3 tests/bench/e2e/peer_pytorch.py [--burstc build/release/tools/burstc]
        [--rounds 3] [--nets fmnist,resnet] [--configs 1x1,1x2,2x1,4x1]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_models  # noqa: E402

STEPS = {"fmnist": 60, "resnet": 20}
WARMUP = {"fmnist": 5, "resnet": 3}

TORCH_CHILD = r"""
import os, sys, time
sys.path.insert(0, %(dir)r)
import torch, torch.multiprocessing as mp, peer_models

def worker(rank, world, threads, net, steps, warmup, port, q):
    import torch.distributed as dist
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    if world > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
    model = peer_models.build(net)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = peer_models.optimizer(net, model.parameters())
    lossf = torch.nn.CrossEntropyLoss()
    B = peer_models.BATCH[net]
    x, y = peer_models.data(net, B * (steps + warmup))
    lo = rank * B // world
    hi = (rank + 1) * B // world
    t0 = None
    for i in range(steps + warmup):
        if i == warmup:
            if world > 1:
                dist.barrier()
            t0 = time.perf_counter()
        xb, yb = x[i * B + lo:i * B + hi], y[i * B + lo:i * B + hi]
        opt.zero_grad()
        lossf(model(xb), yb).backward()
        opt.step()
    elapsed = time.perf_counter() - t0
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        q.put(steps * B / elapsed)

if __name__ == "__main__":
    world, threads, net, steps, warmup, port = %(world)d, %(threads)d, %(net)r, %(steps)d, %(warmup)d, %(port)d
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=worker, args=(r, world, threads, net, steps, warmup, port, q))
          for r in range(world)]
    for p in ps:
        p.start()
    rate = q.get()
    for p in ps:
        p.join()
    print("rate", rate)
"""


def torch_rate(net, procs, threads, tuned, port, tmp):
    script = os.path.join(tmp, "torch_child.py")
    with open(script, "w") as f:
        f.write(TORCH_CHILD % {"dir": os.path.dirname(os.path.abspath(__file__)), "world": procs,
                               "threads": threads, "net": net, "steps": STEPS[net],
                               "warmup": WARMUP[net], "port": port})
    out = subprocess.run([sys.executable, script], env=peer_models.thread_env(threads, tuned),
                         check=True, capture_output=True, text=True, timeout=900).stdout
    return float(re.search(r"^rate (\S+)", out, re.M).group(1))


def burstc_rate(prog, net, procs, threads, tmp):
    trace = os.path.join(tmp, "trace.json")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1")
    args = ["mpirun", "-np", str(procs), "--oversubscribe", "--bind-to", "none", prog,
            "--iterations", str(STEPS[net] + WARMUP[net]), "--threads", str(threads), "--trace", trace]
    if net == "fmnist":
        args += ["--data", "fmnist"]
    subprocess.run(args, check=True, capture_output=True, env=env, timeout=900)
    events = json.load(open(trace))["traceEvents"]
    its = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                 if e.get("name") == "iteration" and e.get("pid") == 0)[WARMUP[net]:]
    return len(its) * peer_models.BATCH[net] / ((its[-1][1] - its[0][0]) * 1e-6)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", default="build/release/tools/burstc")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nets", default="fmnist,resnet")
    ap.add_argument("--configs", default="1x1,1x2,2x1,4x1", help="PROCSxTHREADS,...")
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="SEC",
                    help="before each run, wait up to SEC seconds for the machine to be idle")
    a = ap.parse_args()
    try:
        subprocess.run([sys.executable, "-c", "import torch"], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        sys.exit("PyTorch is not installed: apt-get install python3-torch")
    nets = a.nets.split(",")
    configs = [tuple(int(v) for v in c.split("x")) for c in a.configs.split(",")]
    rates = {}  # (net, procs, threads, runner) -> [rate per round]
    loads = []
    port = 29500
    with tempfile.TemporaryDirectory() as tmp:
        progs = {}
        for net in nets:
            for procs in sorted({p for p, _ in configs}):
                for strategy in ("dp", "burst") if procs > 1 else ("dp",):
                    prog = os.path.join(tmp, "%s_%s_%d" % (net, strategy, procs))
                    subprocess.run([a.burstc, "build", "--strategy", strategy, "--gpus", str(procs),
                                    peer_models.JOBS[net], "-o", prog], check=True, capture_output=True)
                    progs[net, strategy, procs] = prog
        for r in range(a.rounds):
            before = os.getloadavg()[0]
            t0 = time.time()
            for net in nets:
                for procs, threads in configs:
                    runners = ["burstc dp"] + (["burstc burst"] if procs > 1 else []) + \
                              ["pytorch as-is", "pytorch tuned"]
                    k = r % len(runners)
                    for runner in runners[k:] + runners[:k]:
                        if a.wait_quiet:
                            peer_models.wait_quiet(a.wait_quiet)
                        if runner.startswith("burstc"):
                            rate = burstc_rate(progs[net, runner.split()[1], procs], net, procs, threads, tmp)
                        else:
                            port += 1
                            rate = torch_rate(net, procs, threads, runner.endswith("tuned"), port, tmp)
                        rates.setdefault((net, procs, threads, runner), []).append(rate)
            loads.append((before, os.getloadavg()[0], time.time() - t0))
            print("round %d: load average %.2f -> %.2f, %.0f s" % ((r + 1,) + loads[-1]), file=sys.stderr)

    print("burstc vs PyTorch 1.13 on %s: samples/s, median of %d rounds (steps after warm-up: "
          "fmnist %d, resnet %d); ratios: median of the per-round ratios burstc / PyTorch"
          % (os.uname().nodename, a.rounds, STEPS["fmnist"], STEPS["resnet"]))
    print("load average (1 min) around the rounds: %s" %
          ", ".join("%.1f-%.1f" % (b, e) for b, e, _ in loads))
    head = "%-7s %5s %7s %10s %10s %10s %10s %9s %9s %9s %9s" % (
        "net", "procs", "threads", "burstc dp", "burst", "pt as-is", "pt tuned",
        "dp/as-is", "dp/tuned", "best/as", "best/tun")
    print(head)
    for net in nets:
        for procs, threads in configs:
            def med(runner):
                v = rates.get((net, procs, threads, runner))
                return statistics.median(v) if v else None

            def ratio(runner, peer):
                ours = rates.get((net, procs, threads, runner))
                theirs = rates[(net, procs, threads, peer)]
                return statistics.median(o / t for o, t in zip(ours, theirs)) if ours else None

            def best_ratio(peer):
                theirs = rates[(net, procs, threads, peer)]
                best = [max(v) for v in zip(*[rates[(net, procs, threads, rn)] for rn in
                                              ("burstc dp", "burstc burst")
                                              if (net, procs, threads, rn) in rates])]
                return statistics.median(o / t for o, t in zip(best, theirs))

            fmt = lambda v, f: (f % v) if v is not None else "-"  # noqa: E731
            print("%-7s %5d %7d %10s %10s %10s %10s %9s %9s %9s %9s" % (
                net, procs, threads, fmt(med("burstc dp"), "%.1f"), fmt(med("burstc burst"), "%.1f"),
                fmt(med("pytorch as-is"), "%.1f"), fmt(med("pytorch tuned"), "%.1f"),
                fmt(ratio("burstc dp", "pytorch as-is"), "%.2fx"),
                fmt(ratio("burstc dp", "pytorch tuned"), "%.2fx"),
                fmt(best_ratio("pytorch as-is"), "%.2fx"), fmt(best_ratio("pytorch tuned"), "%.2fx")))
    print("best: the faster of burstc's dp and burst plans in each round")


if __name__ == "__main__":
    main()
