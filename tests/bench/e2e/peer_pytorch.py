#!/usr/bin/env python3
"""Training throughput of burstc's generated program against PyTorch, in one run.

The peer is the same CNN (examples/models/fmnist_cnn.burst), the same global
batch, the same data (Debian's Fashion-MNIST) and one thread per process,
trained with plain PyTorch eager on CPU: one process, and 2 and 4 processes with
DistributedDataParallel over gloo. burstc's program runs on 1, 2 and 4 MPI ranks
(data parallel and the burst plan). Each configuration trains ITERS steps
after WARMUP; the table shows the median samples/s of REPEATS runs and the
ratio against PyTorch with the same number of processes.

    python3 tests/bench/e2e/peer_pytorch.py [--burstc build/release/tools/burstc]
"""
import argparse
import gzip
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

FMNIST = "/usr/share/datasets/fashion-mnist"
JOB = "examples/jobs/fmnist_cpu.burst"


def load_fmnist(n):
    import numpy as np
    with gzip.open(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)[:n]
    with gzip.open(os.path.join(FMNIST, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
    return x.astype(np.float32) / 255.0, y.astype(np.int64)


def torch_worker(rank, world, batch, iters, warmup, port, q):
    import torch
    import torch.nn as nn
    torch.set_num_threads(1)
    torch.manual_seed(1)
    if world > 1:
        import torch.distributed as dist
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    x, y = load_fmnist(batch * (iters + warmup))
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    local = batch // world
    t0 = None
    for step in range(iters + warmup):
        if step == warmup:
            t0 = time.perf_counter()
        s = step * batch + rank * local
        xb, yb = x[s:s + local], y[s:s + local]
        opt.zero_grad()
        loss = lossf(model(xb), yb)
        loss.backward()
        opt.step()
    elapsed = time.perf_counter() - t0
    if world > 1:
        import torch.distributed as dist
        dist.destroy_process_group()
    if rank == 0:
        q.put(iters * batch / elapsed)


def torch_run(world, batch, iters, warmup, port):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=torch_worker, args=(r, world, batch, iters, warmup, port, q)) for r in range(world)]
    for p in procs:
        p.start()
    rate = q.get()
    for p in procs:
        p.join()
    return rate


def burstc_run(burstc, strategy, ranks, iters, tmp):
    prog = os.path.join(tmp, "train_%s_%d" % (strategy, ranks))
    if not os.path.exists(prog):
        subprocess.run([burstc, "build", "--strategy", strategy, "--gpus", str(ranks), JOB, "-o", prog], check=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1")
    out = subprocess.run(["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none", prog,
                          "--iterations", str(iters), "--data", "fmnist", "--threads", "1"],
                         check=True, capture_output=True, text=True, env=env).stdout
    return float(re.search(r"throughput (\S+) samples/s", out).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", default="build/release/tools/burstc")
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("PyTorch is not installed: apt-get install python3-torch")

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in (1, 2, 4):
            peer = statistics.median(torch_run(ranks, a.batch, a.iters, a.warmup, 29500 + ranks + 10 * r)
                                     for r in range(a.repeats))
            rows.append(("pytorch" + (" ddp/gloo" if ranks > 1 else ""), ranks, peer, 1.0))
            for strategy in ("dp", "burst") if ranks > 1 else ("dp",):
                # The program times its own steps, warm-up included: run more steps so it is amortised.
                rate = statistics.median(burstc_run(a.burstc, strategy, ranks, a.iters + a.warmup, tmp)
                                         for _ in range(a.repeats))
                rows.append(("burstc " + strategy, ranks, rate, rate / peer))
    print("Fashion-MNIST CNN, global batch %d, %d steps, 1 thread per process, median of %d runs"
          % (a.batch, a.iters, a.repeats))
    print("%-22s %6s %12s %12s" % ("trainer", "procs", "samples/s", "vs pytorch"))
    for name, ranks, rate, ratio in rows:
        print("%-22s %6d %12.1f %11.2fx" % (name, ranks, rate, ratio))


if __name__ == "__main__":
    main()
