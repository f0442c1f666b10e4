#!/usr/bin/env python3
"""The GPU half of `burstc profile` for scripts/gpu-check, and VGG-16 against DeepPool's A100.

The GPU machine has no burstc (no MPI, BLAS or flex there), so scripts/gpu-check
--prepare generates the one-rank VGG-16 programs at each batch (`burstc build --gpus 1
--batch B --emit=c`) and the model's layer list (`burstc stats`); the GPU machine runs
them with --trace and CUDA graphs off, and this script reads the traces exactly as
tools/cmd_profile.c does (a layer's forward is the span named after it, its backward
NAME.bwd; per step summed; median over the steps after the warm-up) and writes the
same `layer` lines (docs/plan.md, "Measured profiles"), which `burstc plan --profile`
reads back on the development machine.

It then sets each layer's forward+backward time next to the vendored DeepPool A100
table (data/profiles/deeppool-a100/vggLayerGpuProfileA100.txt) at the same batch:
the layers in model order against the table's lines in order; DeepPool's layers have
no ReLU or dropout of their own, so ours are added to the layer before them. Exit 1
when a layer has no time at a batch or the layers do not pair with the table's.

    gpu_profile.py --stats vgg16.stats --a100 TABLE --warmup 3 --out P B:TRACE ...
The layer list reads inputs and outputs from `burstc stats`: a chain model (as VGG-16)
only, each layer's input being the output of the layer before it.
"""
import argparse
import json
import re
import statistics
import sys


def layers_of(stats_path):
    """[(name, op, input shape per sample)] of a chain model from burstc stats."""
    out, prev = [], None
    for line in open(stats_path).read().splitlines()[1:]:
        m = re.match(r"^(\S+)\s+(\S+)\s+(\w+)\[N(?:,([\d,]+))?\]", line)
        if not m:
            continue
        name, op, dtype, shape = m.group(1), m.group(2), m.group(3), m.group(4) or ""
        if op == "input":
            if dtype != "i32":
                prev = shape
            continue
        out.append((name, op, prev if prev is not None else ""))
        prev = shape
    return out


def read_trace(path, layers, warmup):
    index = {n: i for i, (n, _, _) in enumerate(layers)}
    fwd = [dict() for _ in layers]
    bwd = [dict() for _ in layers]
    step = 0
    for e in json.load(open(path))["traceEvents"]:
        if e.get("ph") != "X" or e.get("pid", 0) != 0:
            continue
        name, ms = e["name"], e["dur"] / 1e3
        if name == "iteration":
            step += 1
            continue
        back = name.endswith(".bwd")
        i = index.get(name[:-4] if back else name)
        if i is None or step < warmup:
            continue
        d = (bwd if back else fwd)[i]
        d[step] = d.get(step, 0.0) + ms
    steps = range(warmup, step)
    if not steps:
        sys.exit("%s: no timed steps (%d steps, %d warm-up)" % (path, step, warmup))
    res = []
    for i, (n, _, _) in enumerate(layers):
        if not fwd[i]:
            sys.exit("%s: no span for layer %s" % (path, n))
        res.append((statistics.median(fwd[i].get(s, 0.0) for s in steps),
                    statistics.median(bwd[i].get(s, 0.0) for s in steps)))
    return res


def a100_table(path):
    """{batch: [(key, avg ms)] in file order}"""
    t = {}
    for line in open(path):
        m = re.match(r"^\s*(\w+)(\{.*\})\[(\d+)\](\S+)\s+([0-9.]+)", line)
        if m:
            t.setdefault(int(m.group(3)), []).append((m.group(1), float(m.group(5))))
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stats", required=True)
    ap.add_argument("--a100", required=True)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", required=True)
    ap.add_argument("runs", nargs="+", help="BATCH:TRACE")
    a = ap.parse_args()
    layers = layers_of(a.stats)
    table = a100_table(a.a100)
    ok = True
    with open(a.out + ".tmp", "w") as f:
        f.write("# burstc profile (scripts/gpu-check) of %s: target cuda, medians after %d warm-up steps\n"
                % (a.stats, a.warmup))
        for run in a.runs:
            b, trace = run.split(":", 1)
            b = int(b)
            times = read_trace(trace, layers, a.warmup)
            for (n, op, shape), (fm, bm) in zip(layers, times):
                f.write('layer{"name":"%s","op":"%s"}[%d][%s]  %.6f %.6f\n' % (n, op, b, shape, fm, bm))
            # pair with DeepPool's layers: ReLU and dropout folded into the layer before
            ours = []
            for (n, op, _), (fm, bm) in zip(layers, times):
                if op in ("relu", "dropout") and ours:
                    ours[-1][1] += fm + bm
                elif op not in ("cross_entropy", "relu", "dropout"):
                    ours.append([n, fm + bm])
            theirs = table.get(b)
            if theirs is None:
                print("batch %d: not in the A100 table" % b)
                continue
            if len(theirs) != len(ours):
                print("batch %d: %d layers here, %d in the A100 table" % (b, len(ours), len(theirs)))
                ok = False
                continue
            print("batch %d: %-10s %12s %12s %8s" % (b, "layer", "this GPU ms", "A100 ms", "A100/this"))
            for (n, ms), (key, ams) in zip(ours, theirs):
                print("          %-10s %12.4f %12.4f %8.2f" % (n, ms, ams, ams / ms if ms > 0 else 0))
            tot, atot = sum(ms for _, ms in ours), sum(ms for _, ms in theirs)
            print("          %-10s %12.4f %12.4f %8.2f" % ("total", tot, atot, atot / tot if tot > 0 else 0))
    import os
    os.replace(a.out + ".tmp", a.out)
    print("profile written to %s" % a.out)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
