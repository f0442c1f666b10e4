#!/usr/bin/python3
"""End-to-end: training from image folders (--data images:DIR).

    images_data.py --burstc BURSTC --job JOB.burst [--np N]

The first 2,000 Fashion-MNIST training images are written as an ImageFolder of
PNGs (DIR/CLASS/INDEX.png) and, in ImageFolder's order, as .npy arrays; 640 test
images likewise. With the job's plan on N ranks:

- `--data images:DIR --augment off` gives exactly the losses of `--data npy:...`,
  and `--eval-data images:` the same test accuracy as `--eval-data npy:`;
- the same images as JPEGs, with the training transform (RandomResizedCrop and
  flips), train to a falling loss, three decoding threads per rank give the same
  losses and decode batches while the previous step computes (--trace), and a run resumed from a checkpoint at step 8 sees the same crops as an
  uninterrupted one (equal losses);
- an empty class folder fails before training, naming it; a corrupt image met
  mid-run stops the run with an error naming it, or with --skip-bad-data is counted
  and reported at the end of a run that completes.
"""
import argparse
import json
import os
import re
import subprocess
import tempfile

import numpy as np
from PIL import Image

from data_common import accuracy, fail, idx, losses, mpirun


def prefetched(path, steps, workers):
    """Checks from the trace that every training batch after the first step's was
    announced ahead (the loader's decision, not the scheduler's): on each rank that
    decodes, at least steps - 1 spans "(prefetched)" and at most `workers` spans of the
    first batch, asked for unannounced. Returns how many prefetched spans overlap an op
    of the foreground track other than the input and label ops (x, y): batches decoded
    while the previous step computes, which depends on the cores the workers get, so it
    is reported, not asserted."""
    with open(path) as f:
        ev = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
    dec = [e for e in ev if e["name"].startswith("decode training batch")]
    if not dec or not all(e["tid"] >= 65 for e in dec):
        fail("--trace: no data worker tracks (tid 65..) with decode spans: %s"
             % sorted({(e["pid"], e["tid"]) for e in dec}))
    for pid in sorted({e["pid"] for e in dec}):
        ahead = sum(e["pid"] == pid and e["name"].endswith("(prefetched)") for e in dec)
        asked = sum(e["pid"] == pid and not e["name"].endswith("(prefetched)") for e in dec)
        if ahead < steps - 1 or asked > workers:
            fail("--trace: process %d has %d prefetched decoding spans and %d unannounced, expected "
                 "at least %d and at most %d" % (pid, ahead, asked, steps - 1, workers))
    ops = [(e["pid"], e["ts"], e["ts"] + e["dur"]) for e in ev
           if e["tid"] == 0 and e["name"] not in ("x", "y", "iteration")]
    return sum(any(p == e["pid"] and t0 < e["ts"] + e["dur"] and e["ts"] < t1 for p, t0, t1 in ops)
               for e in dec if e["name"].endswith("(prefetched)"))


def write_set(root, images, labels, ext):
    """An ImageFolder and its images in ImageFolder's order (class, then file name)."""
    order = []
    for c in range(10):
        os.makedirs(os.path.join(root, str(c)))
        for i in np.nonzero(labels == c)[0]:
            Image.fromarray(images[i]).save(os.path.join(root, str(c), "%05d.%s" % (i, ext)))
            order.append(i)
    return np.array(order)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--np", type=int, default=4)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        xs, ys = idx("train-images-idx3-ubyte.gz")[:2000], idx("train-labels-idx1-ubyte.gz")[:2000]
        tx, ty = idx("t10k-images-idx3-ubyte.gz")[:640], idx("t10k-labels-idx1-ubyte.gz")[:640]
        png, pngt = os.path.join(tmp, "png"), os.path.join(tmp, "pngt")
        order, torder = write_set(png, xs, ys, "png"), write_set(pngt, tx, ty, "png")
        npy = {}
        for name, arr in (("x", xs[order][:, None]), ("y", ys[order].astype(np.int64)),
                          ("tx", tx[torder][:, None]), ("ty", ty[torder].astype(np.int64))):
            npy[name] = os.path.join(tmp, name + ".npy")
            np.save(npy[name], arr)
        prog = os.path.join(tmp, "prog")
        r = subprocess.run([a.burstc, "build", a.job, "-o", prog], capture_output=True, text=True)
        if r.returncode:
            fail("burstc build failed:\n" + r.stderr)
        it = ["--iterations", "6"]
        ref = mpirun(a.np, prog, it + ["--data", "npy:%s,%s" % (npy["x"], npy["y"]),
                                       "--eval-data", "npy:%s,%s" % (npy["tx"], npy["ty"])]).stdout
        got = mpirun(a.np, prog, it + ["--data", "images:" + png, "--augment", "off",
                                       "--eval-data", "images:" + pngt]).stdout
        if len(losses(ref)) != 6 or losses(got) != losses(ref):
            fail("PNG folder (augment off) losses differ from the npy arrays':\n png %s\n npy %s"
                 % (losses(got), losses(ref)))
        if not accuracy(ref) or accuracy(got) != accuracy(ref):
            fail("test accuracy of the PNG folder %s, of the npy arrays %s" % (accuracy(got), accuracy(ref)))
        print("PNG folder = npy: %d losses (last %s), test accuracy %s on %s samples"
              % (len(losses(got)), losses(got)[-1], *accuracy(got)))

        jpg = os.path.join(tmp, "jpg")
        write_set(jpg, xs, ys, "jpg")
        run = ["--data", "images:" + jpg]
        whole = losses(mpirun(a.np, prog, ["--iterations", "30"] + run).stdout)
        first, last = np.mean([float(x) for x in whole[:5]]), np.mean([float(x) for x in whole[-5:]])
        if not last < first - 0.3:
            fail("JPEG folder with augmentation: the loss did not fall (%.3f -> %.3f): %s" % (first, last, whole))
        print("JPEG folder, augmentation on: loss %.3f -> %.3f over 30 steps" % (first, last))
        trace = os.path.join(tmp, "trace.json")
        three = losses(mpirun(a.np, prog, ["--iterations", "30", "--data-workers", "3", "--trace", trace]
                              + run).stdout)
        if three != whole:
            fail("--data-workers 3 changed the losses:\n 3 %s\n 1 %s" % (three, whole))
        print("--data-workers 3: the same 30 losses")
        ahead = prefetched(trace, 30, 3)
        print("--trace: every batch after the first announced ahead; %d of the prefetched decoding "
              "spans overlap the steps' compute" % ahead)
        ck = os.path.join(tmp, "ck")
        mpirun(a.np, prog, ["--iterations", "8", "--checkpoint-dir", ck, "--checkpoint-every", "8"] + run)
        resumed = losses(mpirun(a.np, prog, ["--iterations", "14", "--checkpoint-dir", ck, "--resume"] + run).stdout)
        if resumed != whole[8:14]:
            fail("resumed losses %s differ from the uninterrupted run's %s" % (resumed, whole[8:14]))
        print("resume at step 8 with augmentation: the same 6 losses")

        os.makedirs(os.path.join(jpg, "99-empty"))
        r = mpirun(a.np, prog, it + run, check=False)
        if r.returncode == 0 or "99-empty: an empty class folder" not in r.stderr or "step 0" in r.stdout:
            fail("an empty class folder should fail before training, got %d:\n%s%s" % (r.returncode, r.stdout, r.stderr))
        print("empty class: " + next(l for l in r.stderr.splitlines() if "99-empty" in l))
        os.rmdir(os.path.join(jpg, "99-empty"))
        victim = sorted(os.listdir(os.path.join(jpg, "3")))[5]
        vp = os.path.join(jpg, "3", victim)
        with open(vp, "r+b") as f:
            f.truncate(100)
        r = mpirun(a.np, prog, ["--iterations", "200", "--data-workers", "2"] + run, check=False)
        if r.returncode == 0 or vp not in r.stderr:
            fail("a truncated JPEG should stop the run naming it, got %d:\n%s" % (r.returncode, r.stderr[-2000:]))
        print("corrupt image: " + next(l for l in r.stderr.splitlines() if vp in l))
        # 35 steps of 64 cover the 2,000 images at least once, so the victim is met.
        r = mpirun(a.np, prog, ["--iterations", "35", "--skip-bad-data"] + run, check=False)
        m = re.search(r"skipped (\d+) bad image samples? .*; the first: (.*)$", r.stderr, re.M)
        if r.returncode or len(losses(r.stdout)) != 35 or not m or not m.group(2).startswith(vp + ": "):
            fail("--skip-bad-data should run the 35 steps and report the truncated JPEG at the end, got "
                 "%d:\n%s%s" % (r.returncode, r.stdout[-1000:], r.stderr[-2000:]))
        print("--skip-bad-data: " + m.group(0))


if __name__ == "__main__":
    main()
