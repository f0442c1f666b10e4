#!/usr/bin/env python3
"""Where a training step's time goes, op by op: burstc's generated program against
PyTorch on the same network, batch and thread count (one process, one thread by default).

burstc: the job built for one rank (examples/jobs/fmnist_cpu.burst, resnet_small_cpu.burst),
run with --trace; each op's forward and backward time is summed over the steps after the
warm-up and divided by their number. PyTorch: the twin network of peer_models.py under
torch.profiler, every thread variable set before torch is imported, with glibc's malloc
tunables (peer_models.MALLOC_TUNED; --as-is: without them); each op kind's inclusive CPU
time (forward: aten::conv2d, aten::batch_norm, ...; backward: the autograd engine's
evaluation of each node, ConvolutionBackward0, ...; the optimizer: SGD.step and
zero_grad) per step, from a profiled run of the same steps after an unprofiled one that
gives the step time (the profiler's own cost is not in it). The median over --rounds runs of each side, run in
turn. Prints ms per step and the ratio burstc / PyTorch (below 1: burstc is faster).

    /usr/bin/python3 tests/bench/e2e/per_op.py [--burstc build/release/tools/burstc]
        [--nets fmnist,resnet] [--threads 1] [--steps 30] [--warmup 5] [--rounds 3] [--no-pytorch]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_models  # noqa: E402

MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1")

# PyTorch's event names -> burstc's op kinds (ir/ops.def), forward and backward.
TORCH_FWD = {"aten::conv2d": "conv2d", "aten::relu": "relu", "aten::batch_norm": "batchnorm2d",
             "aten::max_pool2d": "maxpool2d", "aten::linear": "linear", "aten::add": "add",
             "aten::cat": "concat", "aten::mean": "global_avgpool",
             "aten::cross_entropy_loss": "cross_entropy"}
TORCH_BWD = {"ConvolutionBackward0": "conv2d", "ReluBackward0": "relu",
             "NativeBatchNormBackward0": "batchnorm2d", "MaxPool2DWithIndicesBackward0": "maxpool2d",
             "AddmmBackward0": "linear", "TBackward0": "linear", "AddBackward0": "add",
             "CatBackward0": "concat", "MeanBackward1": "global_avgpool",
             "NllLossBackward0": "cross_entropy", "LogSoftmaxBackward0": "cross_entropy",
             "torch::autograd::AccumulateGrad": "(accumulate grads)"}
TORCH_OPT = {"Optimizer.step#SGD.step": "(sgd step)", "Optimizer.zero_grad#SGD.zero_grad": "(zero grads)"}

TORCH_CHILD = r"""
import json, sys, time
sys.path.insert(0, %(dir)r)
import torch, peer_models
from torch.profiler import profile, ProfilerActivity
torch.set_num_threads(%(threads)d)
torch.manual_seed(1)
net, steps, warmup = %(net)r, %(steps)d, %(warmup)d
model = peer_models.build(net)
opt = peer_models.optimizer(net, model.parameters())
lossf = torch.nn.CrossEntropyLoss()
B = peer_models.BATCH[net]
x, y = peer_models.data(net, B * (steps + warmup))
def step(i):
    i %%= steps + warmup
    opt.zero_grad()
    lossf(model(x[i * B:(i + 1) * B]), y[i * B:(i + 1) * B]).backward()
    opt.step()
for i in range(warmup):
    step(i)
t0 = time.perf_counter()
for i in range(warmup, warmup + steps):
    step(i)
total = time.perf_counter() - t0
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for i in range(warmup, warmup + steps):
        step(i)
out = {"step": 1e3 * total / steps}
for e in prof.key_averages():
    out[e.key] = out.get(e.key, 0.0) + e.cpu_time_total / 1e3 / steps
print(json.dumps(out))
"""


def torch_times(net, threads, steps, warmup, tuned):
    code = TORCH_CHILD % {"dir": os.path.dirname(os.path.abspath(__file__)), "threads": threads,
                          "net": net, "steps": steps, "warmup": warmup}
    out = subprocess.run([sys.executable, "-c", code], env=peer_models.thread_env(threads, tuned),
                         check=True, capture_output=True, text=True).stdout
    raw = json.loads(out.strip().splitlines()[-1])
    per = {"step": raw["step"]}
    # A backward node appears twice, as the engine's evaluation and as the node inside it:
    # the evaluation (which includes the node) is counted.
    engine = "autograd::engine::evaluate_function: "
    for table, d, prefix in ((TORCH_FWD, "fwd", ""), (TORCH_BWD, "bwd", engine), (TORCH_OPT, "", "")):
        for name, kind in table.items():
            if prefix + name in raw:
                per[(kind, d)] = per.get((kind, d), 0.0) + raw[prefix + name]
    return per


def op_kinds(burstc, job):
    ir = subprocess.run([burstc, "--strategy", "dp", "--gpus", "1", job], check=True,
                        capture_output=True, text=True).stdout
    return {m.group(1): m.group(2) for m in re.finditer(r"^\s*%(\S+) = ([a-z_0-9]+)", ir, re.M)}


def burstc_times(burstc, net, prog, kinds, threads, steps, warmup, tmp):
    trace = os.path.join(tmp, "trace.json")
    args = ["mpirun", "-np", "1", "--bind-to", "none", prog, "--iterations", str(steps + warmup),
            "--threads", str(threads), "--trace", trace]
    if net == "fmnist":
        args += ["--data", "fmnist"]
    subprocess.run(args, check=True, capture_output=True, env=MPI_ENV)
    events = [e for e in json.load(open(trace))["traceEvents"] if e.get("ph") == "X"]
    its = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e["name"] == "iteration")[warmup:]
    per = {"step": statistics.mean(b - a for a, b in its) / 1e3}
    # What the trace does not bracket: the loss sum, zero_grad, the optimizer.
    per[("(untraced)", "")] = per["step"]
    lo, hi = its[0][0], its[-1][1]
    for e in events:
        if e["name"] == "iteration" or not lo <= e["ts"] <= hi:
            continue
        name, d = (e["name"][:-4], "bwd") if e["name"].endswith(".bwd") else (e["name"], "fwd")
        kind = kinds.get(name)
        if kind is None:
            kind = "(" + name + ")"
        per[(kind, d)] = per.get((kind, d), 0.0) + e["dur"] / 1e3 / len(its)
        if e.get("pid") == 0 and e["name"] != "iteration":
            per[("(untraced)", "")] -= e["dur"] / 1e3 / len(its)
    return per


def median_table(runs):
    keys = set().union(*runs)
    return {k: statistics.median(r.get(k, 0.0) for r in runs) for k in keys}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", default="build/release/tools/burstc")
    ap.add_argument("--nets", default="fmnist,resnet")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--as-is", action="store_true", help="PyTorch without the malloc tunables")
    ap.add_argument("--no-pytorch", action="store_true",
                    help="burstc's rows only (before and after a change to burstc)")
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="SEC",
                    help="before each run, wait up to SEC seconds for the machine to be idle")
    a = ap.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        for net in a.nets.split(","):
            job = peer_models.JOBS[net]
            prog = os.path.join(tmp, net)
            subprocess.run([a.burstc, "build", "--strategy", "dp", "--gpus", "1", job, "-o", prog],
                           check=True, capture_output=True)
            kinds = op_kinds(a.burstc, job)
            ours, theirs = [], []
            for _ in range(a.rounds):
                if a.wait_quiet:
                    peer_models.wait_quiet(a.wait_quiet)
                ours.append(burstc_times(a.burstc, net, prog, kinds, a.threads, a.steps, a.warmup, tmp))
                if a.no_pytorch:
                    continue
                if a.wait_quiet:
                    peer_models.wait_quiet(a.wait_quiet)
                theirs.append(torch_times(net, a.threads, a.steps, a.warmup, not a.as_is))
            o, t = median_table(ours), median_table(theirs) if theirs else {"step": 0.0}
            print("\n%s (batch %d), %d thread(s), ms per step, median of %d rounds of %d steps; "
                  "PyTorch %s" % (net, peer_models.BATCH[net], a.threads, a.rounds, a.steps,
                                  "as-is" if a.as_is else "with the malloc tunables"))
            print("%-16s %4s %10s %10s %8s" % ("op", "", "burstc", "pytorch", "ratio"))
            rows = sorted(k for k in set(o) | set(t) if k != "step")
            for k in rows:
                ob, tb = o.get(k, 0.0), t.get(k, 0.0)
                if ob < 0.005 and tb < 0.005:
                    continue
                print("%-16s %4s %10.2f %10.2f %8s" % (k[0], k[1], ob, tb, "%.2f" % (ob / tb) if tb > 0 else "-"))
            print("%-16s %4s %10.2f %10.2f %8s" % ("step", "", o["step"], t["step"],
                                                 "%.2f" % (o["step"] / t["step"]) if t["step"] > 0 else "-"))
    print("\nload average at start %.2f %.2f %.2f, at end %.2f %.2f %.2f" % (load + os.getloadavg()))


if __name__ == "__main__":
    main()
