#!/usr/bin/python3
"""real_models.py: `burstc import` on real models, against the hand-written examples.

Exports torchvision's vgg16, resnet50, wide_resnet101_2 and inception_v3
(weights=None: nothing is downloaded) and a GPT-2 written here in torch (the
124M configuration, its LM head tied to the token embedding) to ONNX with
Debian's python3-torch, in training mode (TrainingMode.TRAINING) so that
BatchNorm and Dropout stay what they are in training. Then, for each:

  - imports it (`burstc import`, wall time of the whole process, median of 3),
  - counts the ONNX initializers (trainable, BatchNorm running statistics),
  - compares `burstc stats` of the imported model with the hand-written
    example in examples/models/,
  - plans the same job for both (`burstc plan`: the example cluster, batch,
    dtype and amplification of the example jobs) and compares the predicted
    iteration time of dp and burst.

Prints a Markdown table (docs/import.md records one). Not a test: it needs
python3-torch and minutes. Usage:

    tests/bench/import/real_models.py --burstc build/release/tools/burstc [--keep DIR] [--opset 14]
"""
import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

# model: (example file, example model name, cluster, batch, amplification, optimizer), after
# the example jobs (vgg16_a100, resnet50_a100_64, gpt2_h100) without their background jobs;
# the CNNs without an example job plan as resnet50_a100_64 does.
SGD = "sgd(lr = 0.1, momentum = 0.9, weight_decay = 1e-4)"
JOBS = {
    "vgg16": ("vgg16.burst", "vgg16", "a100_node", 256, "auto", SGD),
    "resnet50": ("resnet50.burst", "resnet50", "a100_64", 1024, "2.0", SGD),
    "wide_resnet101_2": ("wide_resnet101_2.burst", "wide_resnet101_2", "a100_64", 1024, "2.0", SGD),
    "inception_v3": ("inception_v3.burst", "inception_v3", "a100_64", 1024, "2.0", SGD),
    "gpt2": ("gpt2.burst", "gpt2", "h100_node", 64, "auto", "adam(lr = 6e-4, weight_decay = 0.1)"),
}


def gpt2_module():
    """GPT-2 small as nanoGPT writes it: pre-norm blocks, fused QKV, causal mask, tied head."""
    import torch
    import torch.nn as nn

    class Attention(nn.Module):
        def __init__(self, d, heads, ctx):
            super().__init__()
            self.d, self.heads = d, heads
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.attn_dropout, self.resid_dropout = nn.Dropout(0.1), nn.Dropout(0.1)
            self.register_buffer("bias", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx),
                                 persistent=False)

        def forward(self, x):
            b, t, c = x.size()
            q, k, v = self.c_attn(x).split(self.d, dim=2)
            q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
            k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
            v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
            att = self.attn_dropout(torch.softmax(att, dim=-1))
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
            return self.resid_dropout(self.c_proj(y))

    class Block(nn.Module):
        def __init__(self, d, heads, ctx):
            super().__init__()
            self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(d), Attention(d, heads, ctx), nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d),
                                     nn.Dropout(0.1))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, vocab=50257, ctx=1024, d=768, heads=12, layers=12):
            super().__init__()
            self.wte, self.wpe, self.drop = nn.Embedding(vocab, d), nn.Embedding(ctx, d), nn.Dropout(0.1)
            self.h = nn.ModuleList([Block(d, heads, ctx) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, idx):
            pos = torch.arange(0, idx.size(1), dtype=torch.long)
            x = self.drop(self.wte(idx) + self.wpe(pos))
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    return GPT()


def export(name, path, opset):
    """Exports one model in training mode; returns the seconds it took."""
    import torch
    import torchvision

    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    if name == "gpt2":
        model, x = gpt2_module(), torch.zeros(1, 1024, dtype=torch.long)
        names = (["idx"], ["logits"])
    elif name == "inception_v3":
        # Batch 2: BatchNorm in training mode cannot see one value per channel.
        model = torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=False)
        x = torch.randn(2, 3, 299, 299)
        names = (["x"], ["logits", "aux"])
    else:
        model = getattr(torchvision.models, name)(weights=None)
        x = torch.randn(1, 3, 224, 224)
        names = (["x"], ["logits"])
    model.train()
    t0 = time.time()
    torch.onnx.export(model, x, path, opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=names[0], output_names=names[1])
    return time.time() - t0


def initializer_counts(path):
    """(trainable, BatchNorm statistics) elements among the initializers, from onnx itself."""
    import onnx

    m = onnx.load(path, load_external_data=False)
    dims = {t.name: math.prod(t.dims) for t in m.graph.initializer}
    stats = set()
    for n in m.graph.node:
        if n.op_type == "BatchNormalization":
            stats.update(n.input[3:5])
    total = sum(dims.values())
    st = sum(dims[s] for s in stats if s in dims)
    return total - st, st


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("%s failed (%d):\n%s" % (" ".join(cmd), r.returncode, r.stderr))
    return r.stdout


def totals(burstc, path):
    out = run([burstc, "stats", "--totals", path])
    m = re.search(r": (\d+) layers, ([\d,]+) parameters", out)
    return int(m.group(1)), int(m.group(2).replace(",", ""))


def plan(burstc, model_file, model, cluster, batch, amplification, optimizer, tmp):
    """Predicted iteration ms of dp and burst for one job (bf16)."""
    job = os.path.join(tmp, "job_%s.burst" % model)
    with open(job, "w") as f:
        f.write('import "%s"\nimport "%s"\n\njob j {\n  model = %s, cluster = %s, batch = %d\n'
                '  dtype = bf16, optimizer = %s, amplification = %s\n}\n'
                % (model_file, os.path.join(ROOT, "examples", "clusters", cluster + ".burst"),
                   model, cluster, batch, optimizer, amplification))
    out = run([burstc, "plan", job])
    ms = {}
    for line in out.splitlines():
        m = re.match(r"(dp|burst)\s+([\d.]+)\s", line)
        if m:
            ms[m.group(1)] = float(m.group(2))
    return ms["dp"], ms["burst"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--keep", help="keep the exported and imported files in this folder")
    ap.add_argument("--opset", type=int, default=14)
    ap.add_argument("--models", default=",".join(JOBS))
    ap.add_argument("--reuse", action="store_true",
                    help="with --keep: import the ONNX files exported by an earlier run")
    args = ap.parse_args()
    burstc = os.path.abspath(args.burstc)
    tmp = args.keep or tempfile.mkdtemp(prefix="burstc-import-")
    os.makedirs(tmp, exist_ok=True)
    rows = []
    try:
        for name in args.models.split(","):
            example, hand_name, cluster, batch, amp, opt = JOBS[name]
            onnx_path = os.path.join(tmp, name + ".onnx")
            burst_path = os.path.join(tmp, name + "_imported.burst")
            if args.reuse and os.path.exists(onnx_path):
                secs = float("nan")
            else:
                secs = export(name, onnx_path, args.opset)
            times = []
            for _ in range(3):
                t0 = time.time()
                run([burstc, "import", onnx_path, "--name", name + "_onnx", "-o", burst_path])
                times.append(time.time() - t0)
            trainable, stats = initializer_counts(onnx_path)
            layers_i, params_i = totals(burstc, burst_path)
            hand = os.path.join(ROOT, "examples", "models", example)
            layers_h, params_h = totals(burstc, hand)
            dp_i, burst_i = plan(burstc, burst_path, name + "_onnx", cluster, batch, amp, opt, tmp)
            dp_h, burst_h = plan(burstc, hand, hand_name, cluster, batch, amp, opt, tmp)
            rows.append((name, os.path.getsize(onnx_path) / 1e6, secs, statistics.median(times),
                         trainable, stats, params_i, params_h, layers_i, layers_h,
                         "%s, batch %d, amplification %s" % (cluster, batch, amp),
                         dp_i, dp_h, burst_i, burst_h))
            print("%s done" % name, file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print("| model | ONNX MB | export s | import s | ONNX trainable | BN statistics | "
          "burstc stats (imported) | hand-written | layers imported / hand | job | "
          "dp ms imported / hand | burst ms imported / hand |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for r in rows:
        (name, mb, secs, imp, tr, st, pi, ph, li, lh, job, dpi, dph, bi, bh) = r
        same = "=" if pi == ph and pi == tr else "differs"
        print("| %s | %.0f | %.0f | %.2f | %s | %s | %s (%s) | %s | %d / %d | %s | "
              "%.2f / %.2f | %.2f / %.2f |"
              % (name, mb, secs, imp, format(tr, ","), format(st, ","), format(pi, ","), same,
                 format(ph, ","), li, lh, job, dpi, dph, bi, bh))


if __name__ == "__main__":
    main()
