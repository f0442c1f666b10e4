#!/usr/bin/python3
"""Images/s of the training transform: the runtime's (bench_images, one thread) against
torchvision's ImageFolder + DataLoader (num_workers 0) with the same transform
(RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize), on a folder of
500x375 JPEGs made here (ImageNet's typical size; smooth colour fields with noise, JPEG
quality 90, about 60 KB each). Prints a table: the median of ROUNDS passes of each, and
their ratio. Not a test.

    image_transform.py --bench build/tests/bench/bench_images [--images 300] [--rounds 5]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--images", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as root:
        make(root, a.images)
        r = subprocess.run([a.bench, root, "224", "224", str(a.rounds)], capture_output=True, text=True, check=True)
        ours = [int(l.split()[0]) / float(l.split()[1]) for l in r.stdout.splitlines()]
        tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
        loader = torch.utils.data.DataLoader(D.ImageFolder(root, tf), batch_size=32, shuffle=True,
                                             num_workers=0)
        theirs = []
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            n = sum(len(x) for x, _ in loader)
            theirs.append(n / (time.perf_counter() - t0))
        mo, mt = statistics.median(ours), statistics.median(theirs)
        print("| %d JPEGs 500x375 -> 224x224, 1 thread | images/s (median of %d) |" % (a.images, a.rounds))
        print("|---|---|")
        print("| torchvision ImageFolder + DataLoader, 0 workers | %.0f |" % mt)
        print("| burstrt img_sample | %.0f |" % mo)
        print("| ratio | %.2fx |" % (mo / mt))


if __name__ == "__main__":
    main()
