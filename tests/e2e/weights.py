#!/usr/bin/python3
"""Weights in and out (issue 34): PyTorch models exported to ONNX, imported by
`burstc import --weights`, and the safetensors file it writes read back here by
a reader of the format written from its specification (no safetensors package).

`import`: every state_dict() key of the model is in the file with exactly the
model's values (num_batches_tracked included), nothing else is, PyTorch loads
the file into a fresh model with load_state_dict(strict=True), and the metadata
maps each tensor to a parameter of a layer the Burst source has, transposed
where the export stores a linear weight [in, out].
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

    def __init__(self, vocab=32, ctx=8, d=16, heads=2, layers=2, fused=True):
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
        self.lm_head = nn.Linear(d, vocab)

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


def check_import(burstc, tmp, name, model, x, folding=False):
    onnx_path = os.path.join(tmp, name + ".onnx")
    st_path = os.path.join(tmp, name + ".safetensors")
    burst_path = os.path.join(tmp, name + ".burst")
    export(model, x, onnx_path, folding)
    run([burstc, "import", onnx_path, "-o", burst_path, "--weights", st_path])
    tensors, meta = read_safetensors(st_path)
    sd = model.state_dict()
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
        fresh = type(model)() if not isinstance(model, Gpt) else Gpt(fused=model.h[0].attn.fused)
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
        # Folded constants: the exporter stores the 3-d linears' weights transposed.
        _, meta = check_import(args.burstc, tmp, "gpt_folded", Gpt(),
                               torch.zeros(1, 8, dtype=torch.long), folding=True)
        if not any(v.endswith(".weight^T") for v in meta.values()):
            sys.exit("gpt_folded: no weight maps transposed: %r" % meta)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--burstc", required=True)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("import")
    args = ap.parse_args()
    {"import": cmd_import}[args.cmd](args)


if __name__ == "__main__":
    main()
