#!/usr/bin/python3
"""Images/s of the training transform: the runtime's (bench_images) against torchvision's
ImageFolder + DataLoader with the same transform (RandomResizedCrop(224),
RandomHorizontalFlip, ToTensor, Normalize), batches of 32 in a shuffled order, on a
folder of 500x375 JPEGs made here (ImageNet's typical size; smooth colour fields with
noise, JPEG quality 90, about 60 KB each). Rows: one thread each (img_sample on the
calling thread against num_workers 0, one torch thread), then for each worker count N,
the runtime's loader (N decoding threads, prefetching two batches) against DataLoader's
num_workers N (persistent workers, prefetch_factor 2). Each row alternates ROUNDS
passes over the folder of one and the other (each after a warm-up pass), so that a
shared machine's changing load hits both, and prints the medians and the median of the
pairs' ratios, with the load average. Not a test.

    image_transform.py --bench build/tests/bench_images [--images 300] [--rounds 5]
                       [--workers 1,2]
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
import torch
import torchvision.datasets as D
import torchvision.transforms as T
from PIL import Image


def make(root, n):
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:375, 0:500]
    for i in range(n):
        c = i % 10
        os.makedirs(os.path.join(root, "c%d" % c), exist_ok=True)
        f = rng.random(6) * 0.05
        a = np.stack([127 + 100 * np.sin(f[0] * x + f[1] * y + i),
                      127 + 100 * np.sin(f[2] * x - f[3] * y),
                      127 + 100 * np.cos(f[4] * x + f[5] * y)], -1)
        a = np.clip(a + rng.normal(0, 12, a.shape), 0, 255).astype(np.uint8)
        Image.fromarray(a).save(os.path.join(root, "c%d" % c, "%05d.jpg" % i), quality=90)


def ours(bench, root, workers):
    """One pass of bench_images after a warm-up pass in the same process."""
    r = subprocess.run([bench, root, "224", "224", "2", str(workers), "32"],
                       capture_output=True, text=True, check=True)
    n, t = r.stdout.splitlines()[-1].split()
    return int(n) / float(t)


def loader(root, workers):
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    extra = dict(persistent_workers=True, prefetch_factor=2) if workers else {}
    return torch.utils.data.DataLoader(D.ImageFolder(root, tf), batch_size=32, shuffle=True,
                                       num_workers=workers, **extra)


def theirs(ld):
    t0 = time.perf_counter()
    n = sum(len(x) for x, _ in ld)
    return n / (time.perf_counter() - t0)


def row(bench, root, rounds, workers):
    """Passes of the two alternated, so that the machine's load changes hit both: the
    median of each side and the median of the pairs' ratios."""
    ld = loader(root, workers)
    theirs(ld)  # warm-up: starts the workers
    pairs = [(ours(bench, root, workers), theirs(ld)) for _ in range(rounds)]
    return (statistics.median(o for o, _ in pairs), statistics.median(t for _, t in pairs),
            statistics.median(o / t for o, t in pairs))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--images", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", default="1,2")
    a = ap.parse_args()
    torch.set_num_threads(1)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as root:
        make(root, a.images)
        rows = [("1 thread: img_sample / num_workers 0",) + row(a.bench, root, a.rounds, 0)]
        for w in [int(x) for x in a.workers.split(",")]:
            rows.append(("%d worker%s" % (w, "s" if w > 1 else ""),) + row(a.bench, root, a.rounds, w))
    load1 = os.getloadavg()
    print("%d JPEGs 500x375 -> 224x224, images/s, median of %d passes; %d CPUs, load average "
          "%.1f before, %.1f after" % (a.images, a.rounds, os.cpu_count(), load0[0], load1[0]))
    print()
    print("| | burstrt | torchvision ImageFolder + DataLoader | ratio (median of pairs) |")
    print("|---|---|---|---|")
    for name, o, t, q in rows:
        print("| %s | %.0f | %.0f | %.2fx |" % (name, o, t, q))


if __name__ == "__main__":
    main()
