#!/usr/bin/python3
"""import_zoo.py: torchvision's classification models through `burstc import`, plan, build, train.

For each model named (default: all of MODELS), as a user who brings their own model would:

  - exports it with Debian's python3-torch (weights=None: nothing is downloaded) in training
    mode, opset 14, without constant folding, at batch 2 and the model's image size,
  - imports it (`burstc import`, wall time of the whole process) and requires the parameter
    count `burstc stats` gives to equal sum(p.numel() for p in model.parameters()),
  - plans it on one 8-GPU A100 node (`burstc plan`, batch 256, bf16) and reads dp's and
    burst's predicted iteration times,
  - builds a one-rank CPU job at batch 2 and runs 2 steps, requiring two finite losses.

Prints a Markdown table (docs/import.md records one) and exits 1 if any model fails a step.
ctest runs it on a few small models (label import_zoo); the whole list takes minutes.

    tests/e2e/import_zoo.py --burstc build/tools/burstc [--keep DIR] [MODEL ...]
"""
import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# model: the image size it is exported at. Small where the model allows (the parameter count
# does not depend on it, and the CPU steps stay short); the size the architecture needs
# otherwise (vit_b_16's positions are fixed at 224, inception-style stems need room).
MODELS = {
    "mobilenet_v2": 64,
    "mobilenet_v3_small": 64,
    "mnasnet1_0": 64,
    "regnet_y_400mf": 64,
    "shufflenet_v2_x1_0": 64,
    "vit_b_16": 224,
    "densenet121": 64,
    "squeezenet1_1": 64,
    "googlenet": 64,
    "resnext50_32x4d": 64,
    "alexnet": 224,
    "vit_tiny": 32,
    "efficientnet_b0": 64,
}

# Not in torchvision's list: its VisionTransformer class (the code vit_b_16 runs) at a size
# whose CPU steps take seconds, for ctest. vit_b_16 itself trains too, in minutes.
SMALL = {"vit_tiny": dict(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64,
                          mlp_dim=128)}

JOBS = """import "{model}.burst"
import "{root}/examples/clusters/a100_node.burst"
import "{root}/examples/clusters/cpu.burst"
cluster cpu1 {{ gpu = cpu, nodes = 1, gpus_per_node = 1, cores = 1 }}
job plan8 {{ model = {model}, cluster = a100_node, batch = 256, dtype = bf16,
  optimizer = sgd(lr = 0.1, momentum = 0.9), amplification = auto }}
job cpu {{ model = {model}, cluster = cpu1, batch = 2, dtype = f32,
  optimizer = sgd(lr = 0.01), iterations = 2, data = synthetic }}
"""


def export(name, size, path):
    import torch
    import torchvision

    torch.manual_seed(0)
    kw = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
    if name.startswith("efficientnet"):
        # Stochastic depth draws with Bernoulli, which PyTorch 1.13 cannot export in training
        # mode; at probability 0 it is the identity and the rest of the model is unchanged.
        kw = {"stochastic_depth_prob": 0.0}
    if name in SMALL:
        model = torchvision.models.vision_transformer.VisionTransformer(**SMALL[name]).train()
    else:
        model = getattr(torchvision.models, name)(weights=None, **kw).train()
    params = sum(p.numel() for p in model.parameters())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.randn(2, 3, size, size), path, opset_version=14,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    return params


def run(cmd, cwd, timeout):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def first_error(p):
    lines = (p.stderr or p.stdout).strip().splitlines()
    return lines[0] if lines else "exit status %d" % p.returncode


def one(burstc, name, size, d):
    row = {"model": name, "size": size}
    onnx_path = os.path.join(d, name + ".onnx")
    row["torch"] = export(name, size, onnx_path)
    t = time.monotonic()
    p = run([burstc, "import", onnx_path, "-o", os.path.join(d, name + ".burst")], d, 600)
    row["import_s"] = time.monotonic() - t
    if p.returncode != 0:
        return row, "import: " + first_error(p)
    p = run([burstc, "stats", "--totals", name + ".burst"], d, 120)
    m = re.search(r"([0-9,]+) parameters", p.stdout)
    if p.returncode != 0 or not m:
        return row, "stats: " + first_error(p)
    row["burstc"] = int(m.group(1).replace(",", ""))
    if row["burstc"] != row["torch"]:
        return row, "parameters: burstc %d, torch %d" % (row["burstc"], row["torch"])
    with open(os.path.join(d, "jobs.burst"), "w") as f:
        f.write(JOBS.format(model=name, root=ROOT))
    p = run([burstc, "plan", "--job", "plan8", "jobs.burst"], d, 600)
    times = dict(re.findall(r"^(dp|burst)\s+([0-9.]+)", p.stdout, re.M))
    if p.returncode != 0 or "dp" not in times or "burst" not in times:
        return row, "plan: " + first_error(p)
    row["dp_ms"], row["burst_ms"] = float(times["dp"]), float(times["burst"])
    p = run([burstc, "build", "--job", "cpu", "jobs.burst", "-o", "train"], d, 600)
    if p.returncode != 0:
        return row, "build: " + first_error(p)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(["./train", "--iterations", "2"], cwd=d, capture_output=True, text=True,
                       timeout=900, env=env)
    losses = [float(v) for v in re.findall(r"^step \d+ loss (\S+)", p.stdout, re.M)]
    row["losses"] = losses
    if p.returncode != 0:
        return row, "train: " + first_error(p)
    if len(losses) != 2 or not all(math.isfinite(v) for v in losses):
        return row, "train: losses %s" % losses
    return row, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--keep", help="keep the files of each model under this folder")
    ap.add_argument("models", nargs="*", help="torchvision model names (default: %s)" %
                    ", ".join(MODELS))
    a = ap.parse_args()
    burstc = os.path.abspath(a.burstc)
    names = a.models or list(MODELS)
    for n in names:
        if n not in MODELS:
            ap.error("unknown model %r (one of %s)" % (n, ", ".join(MODELS)))
    print("| model | image | torch parameters | burstc parameters | import s | "
          "dp ms (8 A100, batch 256) | burst ms | CPU losses (batch 2) | result |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    failed = 0
    for n in names:
        d = os.path.join(a.keep, n) if a.keep else tempfile.mkdtemp(prefix="zoo-" + n + "-")
        os.makedirs(d, exist_ok=True)
        try:
            row, err = one(burstc, n, MODELS[n], d)
        except subprocess.TimeoutExpired as e:
            row, err = {"model": n, "size": MODELS[n]}, "timed out: %s" % " ".join(e.cmd)
        finally:
            if not a.keep:
                shutil.rmtree(d, ignore_errors=True)
        failed += err is not None

        def f(k, fmt):
            return fmt.format(row[k]) if k in row else ""
        losses = ", ".join("%.4f" % v for v in row.get("losses", []))
        print("| %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            n, row["size"], f("torch", "{:,}"), f("burstc", "{:,}"), f("import_s", "{:.2f}"),
            f("dp_ms", "{:.2f}"), f("burst_ms", "{:.2f}"), losses, err or "ok"), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
