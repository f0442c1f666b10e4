#!/usr/bin/python3
"""Makes the data of the example jobs fmnist_images_cpu.burst and byte_gpt_cpu.burst from
what Debian ships, under OUT (default examples/data, which git ignores):

- OUT/fmnist/train/CLASS/INDEX.png and OUT/fmnist/test/...: Fashion-MNIST
  (/usr/share/datasets/fashion-mnist, Debian's dataset-fashion-mnist) as ImageFolder
  trees of 28x28 grey PNGs, classes named 0_t-shirt ... 9_ankle-boot so that their sorted
  order is the label order;
- OUT/licences/train.bin and val.bin: the licence texts of /usr/share/common-licenses as
  byte tokens (uint16, what nanoGPT's prepare scripts write), the first 90% and the rest.

    examples/jobs/make_example_data.py [--out examples/data] [--images N]

Then, from the repository root:

    burstc build examples/jobs/fmnist_images_cpu.burst -o fmnist && mpirun -np 4 ./fmnist \\
        --eval-data images:examples/data/fmnist/test
    burstc build examples/jobs/byte_gpt_cpu.burst -o gpt && mpirun -np 4 ./gpt \\
        --eval-data tokens:examples/data/licences/val.bin
"""
import argparse
import glob
import gzip
import os
import sys

import numpy as np
from PIL import Image

FMNIST = "/usr/share/datasets/fashion-mnist"
LICENCES = "/usr/share/common-licenses"
CLASSES = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
           "ankle-boot"]


def idx(name):
    with gzip.open(os.path.join(FMNIST, name)) as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)


def folder(root, images, labels):
    for c, name in enumerate(CLASSES):
        os.makedirs(os.path.join(root, "%d_%s" % (c, name)), exist_ok=True)
    for i, (x, y) in enumerate(zip(images, labels)):
        Image.fromarray(x).save(os.path.join(root, "%d_%s" % (y, CLASSES[y]), "%05d.png" % i))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="examples/data")
    ap.add_argument("--images", type=int, default=None, help="at most N training images (default: all 60,000)")
    a = ap.parse_args()
    if not os.path.isdir(FMNIST):
        sys.exit("%s is missing: apt-get install dataset-fashion-mnist" % FMNIST)
    for split, prefix in (("train", "train"), ("test", "t10k")):
        xs, ys = idx(prefix + "-images-idx3-ubyte.gz"), idx(prefix + "-labels-idx1-ubyte.gz")
        if split == "train" and a.images:
            xs, ys = xs[:a.images], ys[:a.images]
        folder(os.path.join(a.out, "fmnist", split), xs, ys)
        print("%s/fmnist/%s: %d PNGs in 10 class folders" % (a.out, split, len(xs)))
    text = b"".join(open(p, "rb").read() for p in sorted(glob.glob(os.path.join(LICENCES, "*")))
                    if os.path.isfile(p))
    tokens = np.frombuffer(text, np.uint8).astype(np.uint16)
    cut = len(tokens) * 9 // 10
    os.makedirs(os.path.join(a.out, "licences"), exist_ok=True)
    tokens[:cut].tofile(os.path.join(a.out, "licences", "train.bin"))
    tokens[cut:].tofile(os.path.join(a.out, "licences", "val.bin"))
    print("%s/licences: %d byte tokens for training, %d for validation" % (a.out, cut, len(tokens) - cut))


if __name__ == "__main__":
    main()
