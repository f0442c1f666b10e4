#!/usr/bin/python3
"""The image decoder and transforms of --data images:DIR against torchvision 0.14
(Pillow) on the same files.

    images_vs_torchvision.py --tool IMAGE_TOOL

Files made here: JPEGs (4:2:0 and 4:4:4, colour and grey, landscape and portrait),
PNGs (RGB, grey, RGBA, palette), at sizes from 37x50 to 500x375.

- eval (Resize + CenterCrop), to 1 and 3 channels and 3 sizes: the pixels of
  T.CenterCrop(S)(T.Resize(S)(img)) exactly;
- train at full scale: for 20 samples each, the crop and flip the runtime drew
  applied with F.resized_crop + F.hflip give its pixels exactly;
- train as the runtime runs it (JPEGs decoded at a reduced scale where the crop
  allows): within 3/255 on average of torchvision's pixels for the same crop;
- the crops' statistics over 4000 samples: area fraction and log aspect ratio
  distributed as RandomResizedCrop.get_params' (two-sample Kolmogorov-Smirnov
  distance below 0.05, where same-distribution samples give about 0.02), flips
  half of the time (within 0.04);
- a corrupt JPEG, a truncated JPEG, a truncated PNG and a text file named .png:
  exit 1 with an error naming the file.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg)


def tool(a, mode, path, c, s, seed=1, sample=0, count=1):
    r = subprocess.run([a.tool, mode, path, str(c), str(s), str(s), str(seed), str(sample), str(count)],
                       capture_output=True)
    if r.returncode:
        return None, r.stderr.decode()
    crops = [tuple(map(int, l.split())) for l in r.stderr.decode().splitlines() if l]
    return np.frombuffer(r.stdout, np.float32).reshape(count, c, s, s), crops


def pixels(img, c):
    a = np.array(img)
    return a[None] if c == 1 else a.transpose(2, 0, 1)


def make_images(d):
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:375, 0:500]
    a = np.stack([x * 255 // 500, y * 255 // 375, (x + y) % 256], -1).astype(np.uint8)
    a = np.clip(a.astype(int) + rng.integers(-20, 20, a.shape), 0, 255).astype(np.uint8)
    files = {}
    def save(name, img, **kw):
        p = os.path.join(d, name)
        img.save(p, **kw)
        files[name] = p
    save("land420.jpg", Image.fromarray(a), quality=90)
    save("port444.jpg", Image.fromarray(a.transpose(1, 0, 2).copy()), quality=95, subsampling=0)
    save("grey.jpg", Image.fromarray(a[:61, :83, 1]))
    save("small.jpg", Image.fromarray(a[:37, :50]))
    save("rgb.png", Image.fromarray(a[:200, :300]))
    save("grey.png", Image.fromarray(a[:50, :37, 0]))
    save("rgba.png", Image.fromarray(np.dstack([a[:90, :120], a[:90, :120, :1]])))
    save("palette.png", Image.fromarray(a[:64, :64]).convert("P"))
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        files = make_images(d)
        for name, p in files.items():
            for c in (1, 3):
                img = Image.open(p).convert("RGB" if c == 3 else "L")
                for s in (16, 32, 64):
                    out, crops = tool(a, "eval", p, c, s)
                    if out is None:
                        check(False, "%s eval: %s" % (name, crops))
                        continue
                    ref = pixels(T.CenterCrop(s)(T.Resize(s)(img)), c)
                    got = np.rint(out[0] * 255).astype(int)
                    check(np.array_equal(got, ref), "%s eval C=%d S=%d: max difference %d" %
                          (name, c, s, np.abs(got - ref).max()))
                s = 32
                out, crops = tool(a, "train-full", p, c, s, seed=7, sample=100, count=20)
                for k, (i, j, h, w, flip) in enumerate(crops):
                    o = F.resized_crop(img, i, j, h, w, [s, s])
                    if flip:
                        o = F.hflip(o)
                    got = np.rint(out[k] * 255).astype(int)
                    check(np.array_equal(got, pixels(o, c)), "%s train C=%d crop %s: max difference %d"
                          % (name, c, (i, j, h, w, flip), np.abs(got - pixels(o, c)).max()))
                out, crops = tool(a, "train", p, c, s, seed=7, sample=100, count=20)
                diff = []
                for k, (i, j, h, w, flip) in enumerate(crops):
                    o = F.resized_crop(img, i, j, h, w, [s, s])
                    if flip:
                        o = F.hflip(o)
                    diff.append(np.abs(out[k] * 255 - pixels(o, c)).mean())
                check(np.mean(diff) < 3, "%s train (reduced-scale decoding) C=%d: mean difference %.2f"
                      % (name, c, np.mean(diff)))
            print("%s: eval and train exact, reduced-scale train within %.2f/255" % (name, np.mean(diff)))

        # The crops' distribution against torchvision's own draws.
        n = 4000
        _, crops = tool(a, "train", files["land420.jpg"], 3, 8, seed=11, sample=0, count=n)
        ours = np.array(crops, float)
        torch.manual_seed(0)
        rrc = T.RandomResizedCrop(8)
        img = Image.open(files["land420.jpg"])
        theirs = np.array([rrc.get_params(img, rrc.scale, rrc.ratio) for _ in range(n)], float)

        def ks(x, y):
            z = np.sort(np.concatenate([x, y]))
            return np.max(np.abs(np.searchsorted(np.sort(x), z, "right") / len(x) -
                                 np.searchsorted(np.sort(y), z, "right") / len(y)))
        area = 375 * 500
        ka = ks(ours[:, 2] * ours[:, 3] / area, theirs[:, 2] * theirs[:, 3] / area)
        kr = ks(np.log(ours[:, 3] / ours[:, 2]), np.log(theirs[:, 3] / theirs[:, 2]))
        kt = ks(ours[:, 0], theirs[:, 0])
        flips = ours[:, 4].mean()
        print("crops: KS distance of area %.3f, of log aspect %.3f, of top %.3f; flips %.3f" % (ka, kr, kt, flips))
        check(ka < 0.05 and kr < 0.05 and kt < 0.05, "crop statistics differ from torchvision's")
        check(abs(flips - 0.5) < 0.04, "flip rate %.3f" % flips)

        # Bad files: an error naming the file, exit status 1.
        jpg = open(files["land420.jpg"], "rb").read()
        bad = {"corrupt.jpg": jpg[:600] + bytes(range(256)) * 8 + jpg[2648:],
               "truncated.jpg": jpg[:len(jpg) // 2],
               "truncated.png": open(files["rgb.png"], "rb").read()[:5000],
               "text.png": b"hello, not an image\n"}
        for name, data in bad.items():
            p = os.path.join(d, name)
            open(p, "wb").write(data)
            r = subprocess.run([a.tool, "eval", p, "3", "16", "16"], capture_output=True, text=True)
            check(r.returncode == 1 and p in r.stderr, "%s: expected exit 1 naming it, got %d: %s"
                  % (name, r.returncode, r.stderr))
            print("%s: %s" % (name, r.stderr.strip()))
    if failures:
        sys.exit("%d checks failed" % len(failures))
    print("all checks passed")


if __name__ == "__main__":
    main()
