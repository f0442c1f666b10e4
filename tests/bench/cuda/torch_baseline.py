#!/usr/bin/env python3
"""PyTorch eager baseline for the GPU check: trains VGG-16 (batch 32, 224x224) or
GPT-2 small (batch 8, 1024 tokens) on synthetic data on one GPU, the same models,
optimizers and dtype as tests/bench/cuda/jobs/*.burst, and prints

    torch MODEL samples/s X (steps A..B, dtype D)

so scripts/gpu-check can put it next to burstc's program. bf16 means autocast to
bfloat16 with f32 weights (what burstc's CUDA backend does: bf16 GEMM inputs, f32
accumulation, f32 master weights). The models are written out here (torchvision and
transformers may be missing): VGG-16 configuration D with dropout as torchvision,
GPT-2 small pre-norm blocks with a tied LM head as Hugging Face's GPT2LMHeadModel.
"""
import argparse
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def vgg16():
    layers, c = [], 3
    for v in [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
              512, 512, 512, "M"]:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU(inplace=True)]
            c = v
    return nn.Sequential(*layers, nn.Flatten(),
                         nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(0.5),
                         nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(0.5),
                         nn.Linear(4096, 1000))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        n, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(n, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        # Eager attention as a plain framework user writes it (no fused kernel), which
        # is also what burstc's runtime computes.
        s = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, device=x.device, dtype=torch.bool).triu(1)
        p = s.masked_fill(mask, float("-inf")).softmax(-1)
        a = (p @ v).transpose(1, 2).reshape(n, t, d)
        x = x + self.proj(a)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, vocab=50257, ctx=1024, d=768, layers=12, heads=12):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.t()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["vgg16", "gpt2"], required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("no GPU visible: skipped")
        return 77
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if a.model == "vgg16":
        batch, model = 32, vgg16().to(dev)
        x = torch.rand(batch, 3, 224, 224, device=dev)
        y = torch.randint(0, 1000, (batch,), device=dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    else:
        batch, model = 8, GPT2().to(dev)
        x = torch.randint(0, 50257, (batch, 1024), device=dev)
        y = torch.randint(0, 50257, (batch, 1024), device=dev)
        opt = torch.optim.Adam(model.parameters(), lr=6e-4, weight_decay=0.1)
    amp = {"bf16": torch.bfloat16, "f16": torch.float16}.get(a.dtype)
    t0 = None
    for step in range(a.steps):
        if step == a.warmup:
            torch.cuda.synchronize()
            t0 = time.monotonic()
        with torch.autocast("cuda", dtype=amp, enabled=amp is not None):
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # burstc's program reads its loss every step too
    torch.cuda.synchronize()
    n = a.steps - a.warmup
    print("torch %s samples/s %.1f (steps %d..%d, dtype %s)"
          % (a.model, n * batch / (time.monotonic() - t0), a.warmup, a.steps - 1, a.dtype))
    return 0


if __name__ == "__main__":
    sys.exit(main())
