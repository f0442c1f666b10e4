#!/usr/bin/python3
"""Weights in and out (issue 34): PyTorch models exported to ONNX, imported by
`burstc import --weights`, and the safetensors file it writes read back here by
a reader of the format written from its specification (no safetensors package).

`import`: every state_dict() key of the model is in the file with exactly the
model's values (num_batches_tracked included), nothing else is, PyTorch loads
the file into a fresh model with load_state_dict(strict=True), and the metadata
maps each tensor to a parameter of a layer the Burst source has, transposed
where the export stores a linear weight [in, out].

`train`: a program built from the imported CNN starts from the file (--init),
trains 3 SGD steps on one rank and on a hand-placed 4-rank plan, and writes its
weights (--save-weights); PyTorch trains the model loaded from the same file on
the same batches (the runtime's synthetic samples, reproduced here). Losses
within 1e-4 relative, every saved tensor within 1e-3 of PyTorch's, a strict
load_state_dict of the result; before any step the saved file is the imported
one; a plain state_dict (no metadata) trains on both plans as PyTorch trains it, found
by the program's weights section; files that do not fit are errors naming the tensor.

`train-torchvision [MODEL] [--size N] [--ranks R ...]`: a torchvision model (resnet18 by
default), where float32 rounding grows over the steps as much in PyTorch as in burstc,
checked against PyTorch's float64 training (referee_check) instead of a fixed tolerance:
as near it as PyTorch's own float32 runs, plain and from weights nudged by one ulp, are.

`train-ops [NAME ...]`: each op the torchvision zoo brought (issue 35: relu6, broadcast mul,
slice and channel shuffle, hardswish, hardsigmoid, silu, class token and positions,
multi-head attention, permutes and a layer norm over channels) in a small model of torchvision's own blocks, on one rank: losses
within 1e-4 relative, every tensor within 1e-3 after 3 steps (the gradients through the op).
"""
import argparse
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch
import torch.nn as nn

from losses_match import unplanned

DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    """(tensors by name as numpy arrays, metadata) of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        a = np.frombuffer(data[b:e], dtype=DTYPES[t["dtype"]])
        out[name] = a.reshape(t["shape"])
    return out, meta


def write_safetensors(path, tensors, meta=None):
    """A safetensors file of numpy arrays (names in sorted order), as the format says."""
    names = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64", np.dtype(np.float16): "F16",
             np.dtype(np.int64): "I64", np.dtype(np.int32): "I32"}
    header, data = {}, b""
    for k in sorted(tensors):
        a = np.ascontiguousarray(tensors[k]).reshape(np.shape(tensors[k]))  # a scalar stays []
        header[k] = {"dtype": names[a.dtype], "shape": list(a.shape),
                     "data_offsets": [len(data), len(data) + a.nbytes]}
        data += a.tobytes()
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
    return p.stdout


class Cnn(nn.Module):
    """Convolutions with and without bias, BatchNorm (2-d and 1-d), Gemm linears."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8, momentum=0.2)
        self.fc1 = nn.Linear(8 * 4 * 4, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.max_pool2d(torch.relu(self.bn2(self.conv2(x))), 2)
        return self.fc2(torch.relu(self.fc1(torch.flatten(x, 1))))


class Attention(nn.Module):
    def __init__(self, d, heads, ctx, fused):
        super().__init__()
        self.d, self.heads, self.fused = d, heads, fused
        if fused:
            self.c_attn = nn.Linear(d, 3 * d)
        else:
            self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.c_proj = nn.Linear(d, d)
        self.register_buffer("bias", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx),
                             persistent=False)

    def forward(self, x):
        b, t, c = x.size()
        if self.fused:
            q, k, v = self.c_attn(x).split(self.d, dim=2)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class Gpt(nn.Module):
    """nanoGPT's shape, small: embeddings with positions, pre-norm blocks, a head."""

    def __init__(self, vocab=32, ctx=8, d=16, heads=2, layers=2, fused=True, tied=False):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.h = nn.ModuleList()
        for i in range(layers):
            blk = nn.Module()
            blk.ln_1, blk.attn = nn.LayerNorm(d), Attention(d, heads, ctx, fused)
            blk.ln_2 = nn.LayerNorm(d)
            blk.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            self.h.append(blk)
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=not tied)
        if tied:
            self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.h:
            x = x + blk.attn(blk.ln_1(x))
            x = x + blk.mlp(blk.ln_2(x))
        return self.lm_head(self.ln_f(x))


def export(model, x, path, folding=False):
    warnings.filterwarnings("ignore")
    model.train()
    torch.onnx.export(model, x, path, opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=folding, input_names=["x"], output_names=["logits"])


def burst_layers(text):
    return {m.group(1) for m in re.finditer(r"^\s+(\w+) = \w+\(", text, re.M)}


def check_import(burstc, tmp, name, model, x, folding=False, make=None):
    onnx_path = os.path.join(tmp, name + ".onnx")
    st_path = os.path.join(tmp, name + ".safetensors")
    burst_path = os.path.join(tmp, name + ".burst")
    export(model, x, onnx_path, folding)
    run([burstc, "import", onnx_path, "-o", burst_path, "--weights", st_path])
    tensors, meta = read_safetensors(st_path)
    sd = model.state_dict()
    # A tied parameter (lm_head.weight = wte.weight) is one initializer of the ONNX file;
    # the importer writes it under both names, so the file is the whole state_dict.
    fail = []
    if not folding:
        if set(tensors) != set(sd):
            fail.append("keys differ: only in the file %s, only in the model %s" %
                        (sorted(set(tensors) - set(sd)), sorted(set(sd) - set(tensors))))
        for k in set(tensors) & set(sd):
            # ONNX keeps no count of batches (and the export's trace has run one): 0.
            want = np.zeros((), np.int64) if k.endswith("num_batches_tracked") else sd[k].numpy()
            if tensors[k].shape != want.shape or not np.array_equal(tensors[k], want):
                fail.append("%s: the file's tensor differs from the model's" % k)
        fresh = make() if make else type(model)() if not isinstance(model, Gpt) else Gpt(
            fused=model.h[0].attn.fused, tied=model.lm_head.bias is None)
        fresh.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in tensors.items()},
                              strict=True)
        for k, v in fresh.state_dict().items():
            if not k.endswith("num_batches_tracked") and not torch.equal(v, sd[k]):
                fail.append("%s: not what load_state_dict read" % k)
    layers = burst_layers(open(burst_path).read())
    if set(meta) != set(tensors):
        fail.append("the metadata does not map every tensor: %s" % sorted(set(meta) ^ set(tensors)))
    for k, target in meta.items():
        m = re.fullmatch(r"(\w+)\.(\w+)(@\d+)?(\^T)?", target)
        if not m or m.group(1) not in layers:
            fail.append("%s maps to %r, no parameter of a layer of the Burst source" % (k, target))
    if fail:
        sys.exit("%s:\n  %s" % (name, "\n  ".join(fail)))
    print("%s: %d tensors, every state_dict key, load_state_dict strict" % (name, len(tensors)))
    return tensors, meta


def cmd_import(args):
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        _, meta = check_import(args.burstc, tmp, "cnn", Cnn(), torch.randn(2, 3, 8, 8))
        want = {"conv1.weight": "conv1.weight", "bn2.running_var": "bn2.running_var",
                "bn1.num_batches_tracked": "bn1.num_batches_tracked", "fc1.weight": "fc1.weight"}
        for k, v in want.items():
            if meta.get(k) != v:
                sys.exit("cnn: %s maps to %r, not %r" % (k, meta.get(k), v))
        _, meta = check_import(args.burstc, tmp, "gpt", Gpt(), torch.zeros(1, 8, dtype=torch.long))
        if not meta.get("h.0.attn.c_attn.weight", "").endswith(".w_qkv"):
            sys.exit("gpt: c_attn.weight maps to %r" % meta.get("h.0.attn.c_attn.weight"))
        _, meta = check_import(args.burstc, tmp, "gpt_qkv", Gpt(fused=False),
                               torch.zeros(1, 8, dtype=torch.long))
        rows = [meta.get("h.1.attn.%s.weight" % p, "") for p in "qkv"]
        if [re.sub(r"^.*w_qkv", "", r) for r in rows] != ["@0", "@16", "@32"]:
            sys.exit("gpt_qkv: q, k, v map to %r" % rows)
        # A head tied to the token embedding: its weight is the table, under both names.
        _, meta = check_import(args.burstc, tmp, "gpt_tied", Gpt(tied=True),
                               torch.zeros(1, 8, dtype=torch.long))
        if meta.get("lm_head.weight") != "wte.weight" or meta.get("wte.weight") != "wte.weight":
            sys.exit("gpt_tied: the tied table maps to %r" % meta)
        # Folded constants: the exporter stores the 3-d linears' weights transposed.
        _, meta = check_import(args.burstc, tmp, "gpt_folded", Gpt(),
                               torch.zeros(1, 8, dtype=torch.long), folding=True)
        if not any(v.endswith(".weight^T") for v in meta.values()):
            sys.exit("gpt_folded: no weight maps transposed: %r" % meta)


# ---- train: burstc and PyTorch from the same weights on the same data ----------------

U64 = np.uint64


def h64(x):
    """rt_hash64 (runtime/rng.c): the splitmix64 finaliser."""
    with np.errstate(over="ignore"):
        x = x + U64(0x9e3779b97f4a7c15)
        x = (x ^ (x >> U64(30))) * U64(0xbf58476d1ce4e5b9)
        x = (x ^ (x >> U64(27))) * U64(0x94d049bb133111eb)
    return x ^ (x >> U64(31))


def uniform(seed, a, b, c, d):
    """rt_rand_uniform: a float32 in [0, 1) from 24 bits of the keys' hash."""
    k = h64(h64(h64(h64(h64(U64(seed)) ^ U64(a)) ^ b) ^ U64(c)) ^ d)
    return (k >> U64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)


def synthetic_batch(seed, step, batch, shape, classes, vocab=0, labels_per_sample=1):
    """The runtime's synthetic training batch `step` (runtime/data.c, synth)."""
    g = (U64(step) * U64(batch) + np.arange(batch, dtype=U64))[:, None]
    per = int(np.prod(shape))
    u = uniform(seed, 0xda7a, g, 0, np.arange(per, dtype=U64)[None, :])
    if vocab:
        x = torch.from_numpy(((u * np.float32(vocab)).astype(np.int32) % vocab).astype(np.int64))
    else:
        x = torch.from_numpy(u)
    ul = uniform(seed, 0xda7a, g, 1, np.arange(labels_per_sample, dtype=U64)[None, :])
    y = (ul * np.float32(classes)).astype(np.int32) % classes
    return x.reshape((batch,) + tuple(shape)), torch.from_numpy(y.astype(np.int64)).reshape(
        (batch,) if labels_per_sample == 1 else (batch, labels_per_sample))


def mpirun(np_, prog, args):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1")
    p = subprocess.run(["mpirun", "-np", str(np_), "--oversubscribe", prog] + args,
                       capture_output=True, text=True, env=env, timeout=600)
    return p.returncode, p.stdout + p.stderr


def losses(out):
    return [float(m.group(1)) for m in re.finditer(r"^step \d+ loss (\S+)$", out, re.M)]


def job_text(name, model_file, ranks, batch, steps):
    return """import "%s"
cluster c%d { gpu = cpu  nodes = 1  gpus_per_node = %d  shm = 5 GB/s @ 1 us }
gpu cpu { flops f32 = 140 GFLOPS  memory = 4 GiB  bandwidth = 16 GB/s  launch = 2 us }
job %s {
  model = %s
  cluster = c%d
  batch = %d
  dtype = f32
  optimizer = sgd(lr = 0.01, momentum = 0.9)
  amplification = 2.0
  iterations = %d
  data = synthetic
}
""" % (model_file, ranks, ranks, name, os.path.splitext(os.path.basename(model_file))[0], ranks,
       batch, steps)


# Where the 4-rank plan puts each layer of the CNN: rank sets that leave rank 0 out, lead
# with other ranks and shard the batch of 8 unevenly, so that --save-weights gathers
# from every rank.
CNN_PLAN = {"x": "0..3", "labels": "3", "conv1": "0..3", "bn1": "0..3", "Relu": "0..3",
            "conv2": "1..3", "bn2": "1..3", "Relu_1": "1, 2", "MaxPool": "1, 2", "Flatten": "2..3",
            "fc1": "2..3", "Relu_2": "3", "fc2": "3", "loss": "3"}


def hand_plan(burstc, job, plan, path):
    """The job's IR with the layers placed as plan says."""
    text = unplanned(run([burstc, job, "--emit=ir"]))
    # The planner's schedule goes with its plan: the build schedules the new one.
    text = re.sub(r"^schedule \w+ \{.*?^\}\n", "", text, flags=re.S | re.M)

    def place(m):
        if m.group(2) not in plan:
            sys.exit("hand_plan: no place for %s" % m.group(2))
        return "%s @[%s]" % (m.group(1), plan[m.group(2)])
    text = re.sub(r"^(\s*%(\w+) = .*: \w+\[[^\]]*\])$", place, text, flags=re.M)
    with open(path, "w") as f:
        f.write(text)


def close(a, b, rtol, atol):
    return a.shape == b.shape and np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol,
                                              atol=atol)


def pytorch_train(make, tensors, steps, batch, shape, classes, vocab, labels_per_sample,
                  dtype=torch.float32):
    """PyTorch from the imported file, the runtime's data, the job's optimizer, in dtype:
    the losses and the state after each step (numpy, float64 for float64 training)."""
    ref = make()
    ref.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in tensors.items()}, strict=True)
    ref = ref.to(dtype)
    ref.train()
    opt = torch.optim.SGD(ref.parameters(), lr=0.01, momentum=0.9)
    want, states = [], []
    for step in range(steps):
        x, y = synthetic_batch(1, step, batch, shape, classes, vocab, labels_per_sample)
        opt.zero_grad()
        out = ref(x if vocab else x.to(dtype))
        loss = nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        want.append(loss.item())
        states.append({k: v.detach().numpy().copy() for k, v in ref.state_dict().items()})
    return ref, want, states


# A float64 run is the referee where float32 training amplifies rounding (resnet18: after
# 3 steps PyTorch's own float32 weights miss its float64 ones by 6-12% of what the steps
# changed): burstc must be as near the float64 result as PyTorch's float32 runs are, within
# REFEREE_FACTOR, tensor by tensor and loss by loss, plus a floor of 2^-16 of the
# tensor's largest value (PyTorch's own distance can be luckily small on a small tensor;
# for a running mean, of 1/16 of the running standard deviation, if larger). PyTorch's
# float32 runs are the plain one and REFEREE_NUDGED runs from the same file with every
# float32 weight moved one ulp up or down at random (nudged): each rounds differently from
# the first op on, as a plan's other order of sums does, so their spread is how far float32
# rounding alone carries a run. One run is one sample of it: from densenet121's file, one
# nudged PyTorch run is farther than 3 times the plain run's distance in 13 of 606 tensors
# after one step and in 330 after three (docs/runtime.md). After one step every distance
# is still a rounding's, so a wrong gradient or statistic stands out there.
REFEREE_FACTOR = 3.0
REFEREE_FLOOR = 2.0 ** -16
REFEREE_NUDGED = 2


def nudged(tensors, seed):
    """tensors with every float32 weight one ulp up or down (a random direction each)."""
    rng = np.random.default_rng(seed)
    out = dict(tensors)
    for k, v in tensors.items():
        if v.dtype == np.float32 and k.endswith("weight"):
            away = np.where(rng.random(v.shape) < 0.5, -np.inf, np.inf).astype(np.float32)
            out[k] = np.nextafter(v, away).astype(np.float32)
    return out


def referee_check(what, got, f32s, f64):
    """Each of got's float tensors (and losses, under "loss N") no farther from f64's
    than REFEREE_FACTOR times the farthest of the float32 runs f32s; returns the worst
    ratio."""
    worst, bad = 0.0, []
    for k, exact in f64.items():
        if exact.dtype == np.int64:
            if not np.array_equal(got[k], exact):
                bad.append("%s: %s, PyTorch %s" % (k, got[k], exact))
            continue
        exact = exact.astype(np.float64)
        e_got = float(np.abs(got[k].astype(np.float64) - exact).max())
        e_torch = max(float(np.abs(f[k].astype(np.float64) - exact).max()) for f in f32s)
        scale = max(float(np.abs(exact).max()), 1e-30)
        var = k[:-len("running_mean")] + "running_var"
        if k.endswith(".running_mean") and var in f64:
            # A mean near 0 is a sum that cancels: its rounding scales with the spread of
            # the values, so its floor is 2^-20 of their standard deviation.
            scale = max(scale, float(np.sqrt(np.abs(f64[var]).max())) / 16)
        bound = REFEREE_FACTOR * e_torch + REFEREE_FLOOR * scale
        worst = max(worst, e_got / bound)
        if e_got > bound:
            bad.append("%s: %.3g from float64's, PyTorch's float32 %.3g" % (k, e_got, e_torch))
    if bad:
        sys.exit("%s: %d farther from PyTorch's float64 training than %g times the farthest "
                 "of its float32 runs:\n  %s" % (what, len(bad), REFEREE_FACTOR, "\n  ".join(bad)))
    return worst


def parity(burstc, tmp, name, make, example, shape, classes, plans, batch=8, steps=3, vocab=0,
           labels_per_sample=1, rtol=1e-4, referee=False):
    """Imports make()'s export with its weights; PyTorch and the program built from the
    job on each plan of plans ((ranks, hand placement or None for the planner's)) train
    `steps` SGD steps from the file on the runtime's synthetic batches. Losses within
    rtol, saved tensors within 1e-3 of PyTorch's, and every plan's within 1e-4 of the
    one-rank run's. With referee, PyTorch trains in float64 too, and the losses and the
    tensors saved after one step and after `steps` are checked by referee_check instead
    of rtol and the fixed 1e-3. Returns the weights file."""
    torch.manual_seed(0)
    model = make()
    tensors, _ = check_import(burstc, tmp, name, model, example, make=make)
    init = os.path.join(tmp, name + ".safetensors")
    data = (steps, batch, shape, classes, vocab, labels_per_sample)
    ref, want, want_states = pytorch_train(make, tensors, *data)
    if referee:
        _, exact, exact_states = pytorch_train(make, tensors, *data, dtype=torch.float64)
        runs32 = [(want, want_states)] + [pytorch_train(make, nudged(tensors, seed), *data)[1:]
                                          for seed in range(1, 1 + REFEREE_NUDGED)]
    want_sd = want_states[-1]  # a tied weight under each of its names, as the file has it
    results = {}
    for ranks, plan in plans:
        job = os.path.join(tmp, "%s%d.burst" % (name, ranks))
        with open(job, "w") as f:
            f.write(job_text("%s%d" % (name, ranks), os.path.join(tmp, name + ".burst"), ranks,
                             batch, steps))
        src = job
        if plan:
            src = os.path.join(tmp, "%s%d.ir" % (name, ranks))
            hand_plan(burstc, job, plan, src)
        prog = os.path.join(tmp, "%s%d" % (name, ranks))
        run([burstc, "build", src, "-o", prog])
        out_path = os.path.join(tmp, "%s_trained%d.safetensors" % (name, ranks))
        rc, out = mpirun(ranks, prog, ["--init", init, "--save-weights", out_path])
        if rc != 0:
            sys.exit("%s, %d ranks: exit %d\n%s" % (name, ranks, rc, out))
        got = losses(out)
        if len(got) != steps:
            sys.exit("%s, %d ranks: %d losses:\n%s" % (name, ranks, len(got), out))
        for i, (g, w) in enumerate(zip(got, want)):
            rel = abs(g - w) / max(abs(w), 1e-12)
            print("%s, %d ranks, step %d: loss %.7f, PyTorch %.7f, relative %.1e" %
                  (name, ranks, i, g, w, rel) +
                  (", PyTorch float64 %.7f" % exact[i] if referee else ""))
            if rel > rtol and not referee:
                sys.exit("%s, %d ranks: step %d's loss is not PyTorch's" % (name, ranks, i))
        saved, _ = read_safetensors(out_path)
        if set(saved) != set(want_sd):
            sys.exit("%s, %d ranks: saved keys differ from state_dict's: %s" %
                     (name, ranks, sorted(set(saved) ^ set(want_sd))))
        if referee:
            def with_losses(sd, ls):
                return dict(sd, **{"loss %d" % i: np.array([v]) for i, v in enumerate(ls)})
            first = os.path.join(tmp, "%s_first%d.safetensors" % (name, ranks))
            rc, out = mpirun(ranks, prog, ["--init", init, "--save-weights", first,
                                           "--iterations", "1"])
            if rc != 0:
                sys.exit("%s, %d ranks, one step: exit %d\n%s" % (name, ranks, rc, out))
            r1 = referee_check("%s, %d ranks, after one step" % (name, ranks),
                               with_losses(read_safetensors(first)[0], losses(out)),
                               [with_losses(st[0], ls[:1]) for ls, st in runs32],
                               with_losses(exact_states[0], exact[:1]))
            r = referee_check("%s, %d ranks, after %d steps" % (name, ranks, steps),
                              with_losses(saved, got),
                              [with_losses(st[-1], ls) for ls, st in runs32],
                              with_losses(exact_states[-1], exact))
            print("%s, %d ranks: as near PyTorch's float64 training as its float32 runs (worst "
                  "tensor or loss at %.2f, after %d steps at %.2f, of %g times the farthest "
                  "run's distance)" % (name, ranks, r1, steps, r, REFEREE_FACTOR))
        worst, worst_k, bad = 0.0, "", []
        for k, w in want_sd.items():
            diff = float(np.abs(saved[k].astype(np.float64) - w).max()) if saved[k].shape == w.shape else float("inf")
            if not close(saved[k], w, 1e-3, 1e-6):
                bad.append("%s (largest difference %.3g, %.2g of the tensor's largest value)" % (
                    k, diff, diff / max(float(np.abs(w).max()), 1e-12)))
            if w.dtype != np.int64 and diff / max(float(np.abs(w).max()), 1e-12) >= worst:
                worst, worst_k = diff / max(float(np.abs(w).max()), 1e-12), k
        if bad and not referee:
            sys.exit("%s, %d ranks: %d tensors differ from PyTorch's after %d steps:\n  %s" % (
                name, ranks, len(bad), steps, "\n  ".join(bad)))
        back = make()
        back.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in saved.items()},
                             strict=True)
        print("%s, %d ranks: %d tensors as PyTorch trained them (largest difference %.1e of the "
              "tensor's largest value, %s%s), load_state_dict strict" % (
                  name, ranks, len(saved), worst, worst_k,
                  "; %d outside 1e-3 elementwise" % len(bad) if bad else ""))
        results[ranks] = saved
    # Refereed, each plan is held to float64 on its own: the rounding a plan's other
    # order of sums brings grows over the steps as PyTorch's does.
    for ranks in results if not referee else ():
        for k in results[1]:
            if not close(results[ranks][k], results[1][k], 1e-4, 1e-7):
                sys.exit("%s: the %d-rank plan's %s differs from the one-rank run's" %
                         (name, ranks, k))
    return init


def cmd_train(args):
    with tempfile.TemporaryDirectory() as tmp:
        init = parity(args.burstc, tmp, "cnn", Cnn, torch.randn(2, 3, 8, 8), (3, 8, 8), 10,
                      [(1, None), (4, CNN_PLAN)])
        # Before any step the saved file is the imported one, tensor for tensor.
        prog = os.path.join(tmp, "cnn1")
        same = os.path.join(tmp, "same.safetensors")
        rc, out = mpirun(1, prog, ["--init", init, "--save-weights", same, "--iterations", "0"])
        a, ma = read_safetensors(init)
        b, mb = read_safetensors(same)
        if rc != 0 or set(a) != set(b) or ma != mb or any(
                a[k].dtype != b[k].dtype or not np.array_equal(a[k], b[k]) for k in a):
            sys.exit("--iterations 0 did not save the imported file back (exit %d)\n%s" % (rc, out))
        print("--iterations 0: the imported file back, tensor for tensor")
        check_plain_state_dict(tmp, prog, init, data=(3, 8, (3, 8, 8), 10, 0, 1),
                               plans=[(4, os.path.join(tmp, "cnn4"))])
        check_init_errors(tmp, prog, init)
        check_export(args.burstc, tmp, init)


def check_plain_state_dict(tmp, prog, init, make=Cnn, name="cnn", data=None, plans=()):
    """A PyTorch state_dict saved without metadata loads by the names the model's weights
    section compiled into the program, trains as the same tensors with the importer's
    metadata do, and --save-weights, with or without --init, writes a state_dict that
    load_state_dict(strict=True) takes. With data (pytorch_train's steps, batch, shape,
    classes, vocab, labels per sample), the one-rank run and each program of plans
    ((ranks, program)) trained from that state_dict are PyTorch's training from it, and
    each plan's is the one-rank run's."""
    torch.manual_seed(5)
    model = make()
    sd = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    if "bn1.num_batches_tracked" in sd:
        sd["bn1.num_batches_tracked"] = np.array(7, np.int64)
    _, meta = read_safetensors(init)
    plain, with_meta = (os.path.join(tmp, name + n + ".safetensors") for n in ("_plain", "_meta"))
    write_safetensors(plain, sd)
    write_safetensors(with_meta, sd, meta)
    back = os.path.join(tmp, name + "_plain_back.safetensors")
    rc, out = mpirun(1, prog, ["--init", plain, "--save-weights", back, "--iterations", "0"])
    if rc != 0:
        sys.exit("--init of a plain state_dict: exit %d\n%s" % (rc, out))
    got, _ = read_safetensors(back)
    if set(got) != set(sd) or any(not np.array_equal(got[k], sd[k]) for k in sd):
        sys.exit("--init of a plain state_dict did not save it back: keys %s, values of %s" %
                 (sorted(set(got) ^ set(sd)),
                  sorted(k for k in sd if k in got and not np.array_equal(got[k], sd[k]))))
    trained = {}
    for kind, path in (("plain", plain), ("with_meta", with_meta)):
        out_path = os.path.join(tmp, name + kind + "_trained.safetensors")
        rc, out = mpirun(1, prog, ["--init", path, "--save-weights", out_path])
        if rc != 0:
            sys.exit("--init %s: exit %d\n%s" % (path, rc, out))
        trained[kind] = (losses(out), read_safetensors(out_path)[0])
    (la, ta), (lb, tb) = trained["plain"], trained["with_meta"]
    if la != lb or set(ta) != set(tb) or any(not np.array_equal(ta[k], tb[k]) for k in ta):
        sys.exit("training from a plain state_dict differs from the same tensors with metadata")
    if "bn1.num_batches_tracked" in sd and int(ta["bn1.num_batches_tracked"]) != 7 + 3:
        sys.exit("bn1.num_batches_tracked: %s, not the file's 7 plus 3 steps" %
                 ta["bn1.num_batches_tracked"])
    res = make().load_state_dict({k: torch.from_numpy(v.copy()) for k, v in ta.items()}, strict=True)
    print(name + ": --init of a plain state_dict (%d tensors, no metadata): saved back tensor for tensor; "
          "3 steps the same losses and tensors as with the importer's metadata; %s" %
          (len(sd), res))
    if data:
        check_plain_plans(name, make, sd, plain, data, (la, ta), plans)
    # Without --init the program's own initialisation goes out under the state_dict's names.
    own, again = (os.path.join(tmp, name + n + ".safetensors") for n in ("_own", "_own_again"))
    rc, out = mpirun(1, prog, ["--save-weights", own, "--iterations", "0"])
    if rc != 0:
        sys.exit("--save-weights without --init: exit %d\n%s" % (rc, out))
    mine, _ = read_safetensors(own)
    loaded = make()
    loaded.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in mine.items()}, strict=True)
    if any(not np.array_equal(v.detach().numpy(), mine[k]) for k, v in loaded.state_dict().items()):
        sys.exit("--save-weights without --init: load_state_dict changed a value")
    rc, out = mpirun(1, prog, ["--init", own, "--save-weights", again, "--iterations", "0"])
    two, _ = read_safetensors(again)
    if rc != 0 or set(two) != set(mine) or any(not np.array_equal(two[k], mine[k]) for k in mine):
        sys.exit("--init of what --save-weights wrote without --init did not give it back")
    print(name + ": --save-weights without --init: %d tensors under the state_dict's names, "
          "load_state_dict(strict=True), read back by --init tensor for tensor" % len(mine))


def check_plain_plans(name, make, sd, plain, data, one, plans):
    """The one-rank run `one` (losses, saved tensors) from the state_dict sd (the file
    plain, no metadata) and each plan's run from it: PyTorch's training from sd, losses
    within 1e-4 relative and tensors within 1e-3; each plan's within 1e-4 of one's. The
    programs find each tensor by the weights section alone, on whichever ranks hold it."""
    _, want, states = pytorch_train(make, sd, *data)
    runs = [(1, one)]
    for ranks, prog in plans:
        out_path = plain[:-len(".safetensors")] + "_trained%d.safetensors" % ranks
        rc, out = mpirun(ranks, prog, ["--init", plain, "--save-weights", out_path])
        if rc != 0:
            sys.exit("%s, %d ranks, --init of a plain state_dict: exit %d\n%s" % (name, ranks, rc, out))
        runs.append((ranks, (losses(out), read_safetensors(out_path)[0])))
    for ranks, (ls, ts) in runs:
        if len(ls) != len(want) or any(abs(g - w) > 1e-4 * abs(w) for g, w in zip(ls, want)):
            sys.exit("%s, %d ranks from a plain state_dict: losses %s, PyTorch %s" %
                     (name, ranks, ls, want))
        if set(ts) != set(states[-1]):
            sys.exit("%s, %d ranks from a plain state_dict: saved keys differ from the "
                     "state_dict's: %s" % (name, ranks, sorted(set(ts) ^ set(states[-1]))))
        bad = [k for k, w in states[-1].items() if not close(ts[k], w, 1e-3, 1e-6)]
        bad += [k for k in one[1] if ranks > 1 and not close(ts[k], one[1][k], 1e-4, 1e-7)]
        if bad:
            sys.exit("%s, %d ranks from a plain state_dict: %s differ from PyTorch's or the "
                     "one-rank run's" % (name, ranks, sorted(set(bad))))
        print("%s, %d ranks from a plain state_dict: losses %s (PyTorch %s), %d tensors as "
              "PyTorch's%s" % (name, ranks, " ".join("%.7f" % v for v in ls),
                               " ".join("%.7f" % v for v in want), len(ts),
                               " and the one-rank run's" if ranks > 1 else ""))


def check_export(burstc, tmp, init):
    """burstc export: the 4-rank plan's checkpoint round as the file --save-weights writes
    at the same step, byte for byte; without --names the weights section's names, or
    Burst's for a model without one; files and jobs that do
    not fit are errors naming the file, and nothing is written."""
    import shutil
    prog, job = os.path.join(tmp, "cnn4"), os.path.join(tmp, "cnn4.ir")
    ck, saved = os.path.join(tmp, "ck"), os.path.join(tmp, "saved4.safetensors")
    rc, out = mpirun(4, prog, ["--init", init, "--save-weights", saved, "--checkpoint-dir", ck])
    if rc != 0:
        sys.exit("cnn, 4 ranks, --checkpoint-dir: exit %d\n%s" % (rc, out))
    rounds = sorted(os.listdir(ck))
    exported = os.path.join(tmp, "exported.safetensors")
    for src in (ck, os.path.join(ck, rounds[-1])):
        run([burstc, "export", src, "-o", exported, "--job", job, "--names", init])
        if open(exported, "rb").read() != open(saved, "rb").read():
            sys.exit("burstc export %s: not the file --save-weights wrote" % src)
    got, _ = read_safetensors(exported)
    back = Cnn()
    back.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in got.items()}, strict=True)
    print("burstc export of the 4-rank round (%s): --save-weights' file byte for byte, "
          "load_state_dict strict" % rounds[-1])
    # --onnx: the imported model with the trained weights as its initializers.
    import onnx
    from onnx import numpy_helper
    onnx_in, onnx_out = os.path.join(tmp, "cnn.onnx"), os.path.join(tmp, "trained.onnx")
    run([burstc, "export", ck, "-o", onnx_out, "--job", job, "--names", init, "--format", "onnx",
         "--onnx", onnx_in])
    model, before = onnx.load(onnx_out), onnx.load(onnx_in)
    onnx.checker.check_model(model)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    if set(inits) != {t.name for t in before.graph.initializer} or any(
            not np.array_equal(inits[k], got[k]) for k in got if not k.endswith("_tracked")) or \
            [n.SerializeToString() for n in model.graph.node] != \
            [n.SerializeToString() for n in before.graph.node]:
        sys.exit("burstc export --onnx: not the imported model with the trained initializers")
    print("burstc export --onnx: the imported model, its %d initializers the trained tensors" %
          len(inits))
    # Without --names: the names of the model's weights section (the job's IR keeps it),
    # which for this f32 export are --names' own; without the section, Burst's names.
    run([burstc, "export", ck, "-o", exported, "--job", job])
    by_table, meta = read_safetensors(exported)
    if meta != read_safetensors(init)[1] or set(by_table) != set(got) or any(
            not np.array_equal(by_table[k], got[k]) for k in got):
        sys.exit("burstc export without --names: not the tensors under the weights section's names")
    print("burstc export without --names: %d tensors under the weights section's names, as "
          "with --names" % len(by_table))
    bare = os.path.join(tmp, "cnn4_bare.ir")
    with open(job) as f, open(bare, "w") as o:
        o.writelines(line for line in f if not line.lstrip().startswith("weight "))
    run([burstc, "export", ck, "-o", exported, "--job", bare])
    plain, meta = read_safetensors(exported)
    want = {"conv1.weight": "conv1.weight", "fc1.weight": "fc1.weight",
            "bn2.running_var": "bn2.running_var"}
    if meta or not all(np.array_equal(plain[b], got[n]) for n, b in want.items()) or \
            plain["bn1.num_batches_tracked"] != 3:
        sys.exit("burstc export of a model without a weights section: not the tensors under "
                 "Burst's names")

    def copy_round(name, change):
        d = os.path.join(tmp, name)
        shutil.copytree(os.path.join(ck, rounds[-1]), d)
        change(d)
        return d

    def flip(d):
        p = os.path.join(d, "rank-2.ckpt")
        b = bytearray(open(p, "rb").read())
        b[len(b) // 2] ^= 1
        open(p, "wb").write(bytes(b))

    def cut(d):
        p = os.path.join(d, "rank-3.ckpt")
        b = open(p, "rb").read()
        open(p, "wb").write(b[:len(b) - 20])

    gpt = os.path.join(tmp, "gpt.safetensors")
    cases = [
        ("a 1-rank job", ck, os.path.join(tmp, "cnn1.burst"), [],
         r"rank-0.ckpt: was written by rank 0 of 4, expected rank 0 of 1"),
        ("a missing rank", copy_round("norank", lambda d: os.remove(os.path.join(d, "rank-1.ckpt"))),
         job, [], r"cannot open .*norank/rank-1.ckpt"),
        ("a flipped bit", copy_round("flipped", flip), job, [], r"rank-2.ckpt: corrupt \(checksum"),
        ("a cut file", copy_round("cut", cut), job, [], r"rank-3.ckpt: truncated or corrupt \(.fc2.bias. needs 80 bytes, 68 are left\)"),
        ("no commit", copy_round("nocommit", lambda d: os.remove(os.path.join(d, "COMMIT"))),
         job, [], r"nocommit holds no committed checkpoint round"),
        ("--onnx without --names", ck, job, ["--onnx", onnx_in],
         r"--onnx needs --names"),
        ("--format onnx without --onnx", ck, job, ["--names", init, "--format", "onnx"],
         r"--format onnx needs --onnx MODEL.onnx"),
        ("--format tar", ck, job, ["--format", "tar"], r"--format tar: the formats are"),
        ("--format safetensors with --onnx", ck, job,
         ["--names", init, "--format", "safetensors", "--onnx", onnx_in],
         r"--onnx writes an ONNX model, not --format safetensors"),
        ("--onnx of no model", ck, job, ["--names", init, "--onnx", init],
         r"--onnx: .*cnn.safetensors: not a valid ONNX model"),
        ("another model's names", ck, job, ["--names", gpt],
         r"tensor '(wte|h.0.attn.c_attn).weight' of --names maps to '\S+', which the checkpoint"),
    ]
    for what, src, j, more, want in cases:
        out_path = os.path.join(tmp, "bad.onnx" if "--onnx" in more else "bad.safetensors")
        p = subprocess.run([burstc, "export", src, "-o", out_path, "--job", j] + more,
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 1 or not re.search(want, p.stderr) or os.path.exists(out_path):
            sys.exit("burstc export with %s: exit %d, want an error matching %r and no file:\n%s"
                     % (what, p.returncode, want, p.stderr))
        print("burstc export with %s: %s" % (what, p.stderr.strip().splitlines()[0]))


def check_init_errors(tmp, prog, init):
    """Files that do not fit the program: a clear error naming the tensor, never a crash;
    --init-partial loads what fits."""
    tensors, meta = read_safetensors(init)
    gpt = os.path.join(tmp, "gpt.safetensors")
    write_safetensors(gpt, {"wte.weight": np.zeros((32, 16), np.float32),
                            "h.0.attn.c_attn.weight": np.zeros((48, 16), np.float32)},
                      {"h.0.attn.c_attn.weight": "attn.w_qkv"})

    def variant(name, change):
        t, m = dict(tensors), dict(meta)
        change(t, m)
        path = os.path.join(tmp, name + ".safetensors")
        write_safetensors(path, t, m)
        return path

    def bad_shape(t, m):
        t["conv1.weight"] = np.zeros((8, 3, 5, 5), np.float32)

    def bad_dtype(t, m):
        t["fc1.bias"] = np.zeros(16, np.int32)

    def no_head(t, m):
        del t["fc2.weight"], t["fc2.bias"]

    def extra(t, m):
        t["head2.weight"] = np.zeros((4, 16), np.float32)

    def transposed(t, m):
        t["fc1.weight"] = np.ascontiguousarray(t["fc1.weight"].T)
        m["fc1.weight"] = "fc1.weight^T"

    truncated = os.path.join(tmp, "truncated.safetensors")
    with open(init, "rb") as f, open(truncated, "wb") as g:
        g.write(f.read()[:-100])
    cases = [
        ("another model", gpt, [], r"init: .*gpt.safetensors has no tensor for parameter 'conv1.weight' \[8, 3, 3, 3\]"),
        ("a shape", variant("shape", bad_shape), [],
         r"tensor 'conv1.weight': shape \[8, 3, 5, 5\], but parameter 'conv1.weight' is \[8, 3, 3, 3\]"),
        ("a dtype", variant("dtype", bad_dtype), [], r"tensor 'fc1.bias': dtype I32"),
        ("a missing head", variant("nohead", no_head), [], r"has no tensor for parameter 'fc2.weight' \[10, 16\]"),
        ("an extra tensor", variant("extra", extra), [], r"tensor 'head2.weight' of .* fits no parameter|tensor 'head2.weight' fits no parameter"),
        ("a truncated file", truncated, [], r"init: .*truncated.safetensors: "),
    ]
    for what, path, more, want in cases:
        rc, out = mpirun(1, prog, ["--init", path, "--iterations", "1"] + more)
        if rc == 0 or not re.search(want, out) or "Segmentation" in out or "Abort" in out:
            sys.exit("--init with %s: exit %d, want an error matching %r:\n%s" % (what, rc, want, out))
        print("--init with %s: %s" % (what, [l for l in out.splitlines() if "burstrt" in l][0]))
    # A new head: --init-partial keeps its own initialisation and says so.
    out_path = os.path.join(tmp, "partial.safetensors")
    rc, out = mpirun(1, prog, ["--init", variant("nohead", no_head), "--init-partial",
                               "--iterations", "0", "--save-weights", out_path])
    if rc != 0 or "'fc2.weight' [10, 16]: kept its own initialisation" not in out:
        sys.exit("--init-partial without the head: exit %d\n%s" % (rc, out))
    saved, _ = read_safetensors(out_path)
    if not np.array_equal(saved["conv1.weight"], tensors["conv1.weight"]) or "fc2.weight" not in saved:
        sys.exit("--init-partial: not the file's weights and the program's head")
    # A weight stored transposed (^T) loads as the same parameter.
    rc, out = mpirun(1, prog, ["--init", variant("transposed", transposed), "--iterations", "0",
                               "--save-weights", out_path])
    saved, meta2 = read_safetensors(out_path)
    if rc != 0 or saved["fc1.weight"].shape != (128, 16) or not np.array_equal(
            saved["fc1.weight"].T, tensors["fc1.weight"]) or meta2.get("fc1.weight") != "fc1.weight^T":
        sys.exit("--init with a transposed weight: exit %d\n%s" % (rc, out))
    print("--init-partial: the head kept; a ^T weight read and written back transposed")


def cmd_train_gpt(args):
    """Embeddings with positions, attention (fused q, k, v and three projections), layer
    norms, GELU, a head: on one rank and on the planner's 4-rank plan."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, fused, tied, plans in (("gpt", True, False, [(1, None), (4, None)]),
                                         ("gpt_qkv", False, False, [(1, None), (4, None)]),
                                         ("gpt_tied", True, True, [(1, None), (4, None)])):
            make = lambda: Gpt(fused=fused, tied=tied)
            init = parity(args.burstc, tmp, name, make,
                          torch.zeros(1, 8, dtype=torch.long), (8,), 32, plans,
                          batch=4, vocab=32, labels_per_sample=8)
            check_plain_state_dict(tmp, os.path.join(tmp, name + "1"), init, make, name,
                                   data=(3, 4, (8,), 32, 32, 8),
                                   plans=[(4, os.path.join(tmp, name + "4"))])
        # A tied weight's two names hold one tensor: a state_dict where they differ is refused.
        sd, _ = read_safetensors(os.path.join(tmp, "gpt_tied_plain.safetensors"))
        sd["lm_head.weight"] = sd["lm_head.weight"].copy()
        sd["lm_head.weight"][3, 5] += 1e-3
        bad = os.path.join(tmp, "gpt_tied_untied.safetensors")
        write_safetensors(bad, sd)
        rc, out = mpirun(1, os.path.join(tmp, "gpt_tied1"), ["--init", bad, "--iterations", "0"])
        pair = r"('wte.weight' and 'lm_head.weight'|'lm_head.weight' and 'wte.weight')"
        if rc == 0 or not re.search(r"tensors %s both hold parameter 'wte.weight' .*but their "
                                    r"values differ" % pair, out):
            sys.exit("--init of a tied pair that differs: exit %d\n%s" % (rc, out))
        print("gpt_tied: --init of a state_dict whose tied names differ: refused, naming both")
        # burstc export of the tied model's round: the table under both names, as
        # --save-weights has it.
        ck, saved = os.path.join(tmp, "ck_tied"), os.path.join(tmp, "saved_tied.safetensors")
        rc, out = mpirun(1, os.path.join(tmp, "gpt_tied1"), ["--init", init, "--save-weights", saved,
                                                             "--checkpoint-dir", ck])
        if rc != 0:
            sys.exit("gpt_tied, --checkpoint-dir: exit %d\n%s" % (rc, out))
        exported = os.path.join(tmp, "exported_tied.safetensors")
        run([args.burstc, "export", ck, "-o", exported, "--job", os.path.join(tmp, "gpt_tied1.burst"),
             "--names", init])
        if open(exported, "rb").read() != open(saved, "rb").read():
            sys.exit("burstc export of the tied GPT: not the file --save-weights wrote")
        run([args.burstc, "export", ck, "-o", exported, "--job", os.path.join(tmp, "gpt_tied1.burst")])
        plain, _ = read_safetensors(exported)
        if ("wte.weight" not in plain or set(k for k in plain if k.startswith("lm_head")) !=
                {"lm_head.weight"} or not np.array_equal(plain["wte.weight"], plain["lm_head.weight"])):
            sys.exit("burstc export of the tied GPT by its weights section: %s" % sorted(plain))
        print("burstc export of the tied GPT: --save-weights' file byte for byte; the table "
              "under both names")
        # As ONNX: the export's one initializer for the table, the trained one.
        import onnx
        from onnx import numpy_helper
        onnx_in, onnx_out = os.path.join(tmp, "gpt_tied.onnx"), os.path.join(tmp, "tied.onnx")
        run([args.burstc, "export", ck, "-o", onnx_out, "--job", os.path.join(tmp, "gpt_tied1.burst"),
             "--names", init, "--format", "onnx", "--onnx", onnx_in])
        model, before = onnx.load(onnx_out), onnx.load(onnx_in)
        onnx.checker.check_model(model)
        inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        trained, _ = read_safetensors(saved)
        if set(inits) != {t.name for t in before.graph.initializer} or "lm_head.weight" in inits or \
                any(not np.array_equal(inits[k], trained[k]) for k in inits):
            sys.exit("burstc export --format onnx of the tied GPT: not the trained initializers")
        print("burstc export --format onnx of the tied GPT: %d initializers, the table once, "
              "trained" % len(inits))


def cmd_train_torchvision(args):
    """A torchvision model (random init in PyTorch, weights=None), batch 8 of --size x
    --size images, on one rank and on the planner's plan for each of --ranks, refereed
    by PyTorch's float64 training; resnet18 at 224 on one rank is the issue's case."""
    import torchvision
    kw = {"aux_logits": False, "init_weights": True} if args.model == "googlenet" else {}
    make = lambda: getattr(torchvision.models, args.model)(weights=None, **kw)
    with tempfile.TemporaryDirectory() as tmp:
        n = args.size
        parity(args.burstc, tmp, args.model, make, torch.randn(2, 3, n, n), (3, n, n), 1000,
               [(r, None) for r in args.ranks], batch=8, referee=True)


def _bn_gain(model, gain):
    """Batch norms that scale by gain: activations spread past ReLU6's 6 and hardswish's and
    hardsigmoid's +-3, so the test reaches every piece of each op."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            nn.init.constant_(m.weight, gain)
    return model


class OpNet(nn.Module):
    """A stem convolution, the blocks under test, a global average pool and a linear head."""

    def __init__(self, stem, body, channels, classes=10):
        super().__init__()
        self.stem, self.body = stem, body
        self.fc = nn.Linear(channels, classes)

    def forward(self, x):
        x = self.body(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Residual(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return x + self.body(x)


def _stem(act, c=8):
    return nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), act())


def op_models():
    """name: (what it guards, a make() of a small model built from torchvision's own blocks,
    so that the export has the patterns torchvision's models have)."""
    import torchvision
    from torchvision.models import convnext, mobilenetv2, mobilenetv3, shufflenetv2
    from torchvision.ops.misc import Permute
    from torchvision.ops.misc import SqueezeExcitation

    def mnv3_block():
        cnf = mobilenetv3.InvertedResidualConfig(8, 3, 16, 8, True, "HS", 1, 1, 1.0)
        return mobilenetv3.InvertedResidual(cnf, nn.BatchNorm2d)

    def vit():
        m = torchvision.models.vision_transformer.VisionTransformer(
            image_size=16, patch_size=8, num_layers=1, num_heads=2, hidden_dim=16, mlp_dim=32,
            num_classes=10)
        # torchvision starts the head and the class token at zero: the first loss would be
        # ln(10) whatever the body computed.
        for p in (m.heads.head.weight, m.class_token):
            nn.init.normal_(p, std=0.5)
        return m

    return {
        # mobilenet_v2: Clip(0, 6) after batch norms, depthwise convolutions.
        "relu6": ("relu6", lambda: _bn_gain(OpNet(_stem(nn.ReLU6), mobilenetv2.InvertedResidual(
            8, 8, 1, 2), 8), 4.0)),
        # regnet's squeeze-and-excitation: [N,C,1,1] * [N,C,H,W].
        "mul": ("mul (broadcast)", lambda: OpNet(_stem(nn.ReLU), SqueezeExcitation(8, 4), 8)),
        # shufflenet_v2: chunk(2, dim=1) (two Slices), concat and the channel shuffle.
        "slice": ("slice, channel shuffle", lambda: OpNet(_stem(nn.ReLU), nn.Sequential(
            shufflenetv2.InvertedResidual(8, 8, 1), shufflenetv2.InvertedResidual(8, 8, 1)), 8)),
        # mobilenet_v3: hardswish activations, an excitation scaled by hardsigmoid.
        "hardswish": ("hardswish, hardsigmoid", lambda: _bn_gain(OpNet(_stem(nn.Hardswish),
                                                                       mnv3_block(), 8), 4.0)),
        "hardsigmoid": ("hardsigmoid", lambda: _bn_gain(OpNet(_stem(nn.ReLU), SqueezeExcitation(
            8, 4, scale_activation=nn.Hardsigmoid), 8), 4.0)),
        # efficientnet: SiLU (x * Sigmoid(x)) in the stem and the excitation.
        "silu": ("silu", lambda: OpNet(_stem(nn.SiLU), SqueezeExcitation(8, 4, activation=nn.SiLU),
                                       8)),
        # vit_b_16's code: class token, positions, nn.MultiheadAttention, layer norms, GELU.
        "vit": ("tokens, multi-head attention", vit),
        # convnext's LayerNorm2d (a layer norm over channels between two permutes) and its
        # block's MLP on [N,H,W,C] between permutes, with the residual around it.
        "permute": ("permute, layer norm over channels", lambda: OpNet(
            nn.Sequential(nn.Conv2d(3, 8, 4, stride=4), convnext.LayerNorm2d(8)),
            Residual(nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), Permute([0, 2, 3, 1]),
                                   nn.LayerNorm(8, eps=1e-6), nn.Linear(8, 32), nn.GELU(),
                                   nn.Linear(32, 8), Permute([0, 3, 1, 2]))), 8)),
    }


def cmd_train_ops(args):
    """Each op the torchvision zoo brought (issue 35) in a small model: 3 SGD steps on one
    rank from PyTorch's weights, losses within 1e-4 relative of PyTorch's and every tensor
    within 1e-3 (the gradients through the op)."""
    models = op_models()
    names = args.names or list(models)
    for name in names:
        if name not in models:
            sys.exit("train-ops: no model %r (one of %s)" % (name, ", ".join(models)))
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            what, make = models[name]
            size = 16
            parity(args.burstc, tmp, name, make, torch.randn(2, 3, size, size), (3, size, size),
                   10, [(1, None)], batch=4)
            print("%s: %s as PyTorch" % (name, what))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--burstc", required=True)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("import")
    sub.add_parser("train")
    sub.add_parser("train-gpt")
    tv = sub.add_parser("train-torchvision")
    tv.add_argument("model", nargs="?", default="resnet18")
    tv.add_argument("--size", type=int, default=224)
    tv.add_argument("--ranks", type=int, nargs="+", default=[1])
    ops = sub.add_parser("train-ops")
    ops.add_argument("names", nargs="*", help="of op_models() (default: all)")
    args = ap.parse_args()
    {"import": cmd_import, "train": cmd_train, "train-gpt": cmd_train_gpt,
     "train-torchvision": cmd_train_torchvision, "train-ops": cmd_train_ops}[args.cmd](args)


if __name__ == "__main__":
    main()
