#!/usr/bin/env python3
"""burstc profile end to end: measure the Fashion-MNIST job on this machine at two
small per-GPU batches, then require that the written profile

  - has one `layer` line per layer of the model (burstc stats lists them) at each
    batch, the op and per-sample input shape of that layer, finite times, a
    positive forward time for every layer with work, a positive backward time for
    every layer with parameters;
  - is read back by `burstc plan --profile`, which says it covers every layer, and
    whose one-GPU plan at each measured batch shows exactly the measured forward
    and backward times of every layer (to the table's four decimals);
  - was written atomically (no temporary file left beside it);
  - skipped, with a note, a third batch too large for the GPU's memory.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

BATCHES = (2, 4)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
    return p.stdout, p.stderr


def fail(msg):
    sys.exit("FAIL: " + msg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--job", required=True)
    a = ap.parse_args()

    # The model's layers, their ops and per-sample shapes, from burstc stats.
    stats, _ = run([a.burstc, "stats", a.job])
    layers = []  # (name, op, output shape per sample)
    for line in stats.splitlines()[1:]:
        m = re.match(r"^(\S+)\s+(\S+)\s+\w+\[N(?:,([\d,]+))?\]", line)
        if m and m.group(2) != "input":
            layers.append((m.group(1), m.group(2)))
    if len(layers) != 11:
        fail("expected the 11 layers of fmnist_cnn in burstc stats, got %d" % len(layers))
    with_params = {n for n, op in layers if op in ("conv2d", "linear")}

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "fmnist.profile")
        # 2^30 samples do not fit the `cpu` device's 4 GiB: skipped with a note.
        _, err = run([a.burstc, "profile", a.job, "--batches", ",".join(map(str, BATCHES)) + ",1073741824",
                      "--warmup", "1", "--repeat", "3", "-o", out])
        if "11 layers at 2 batches written" not in err:
            fail("unexpected summary:\n" + err)
        if "note: batch 1073741824 skipped: layer" not in err:
            fail("no note for the batch that does not fit:\n" + err)
        if "# batch 1073741824 skipped: layer" not in open(out).read():
            fail("no '# batch ... skipped' line in the profile")
        left = [f for f in os.listdir(tmp) if f != "fmnist.profile"]
        if left:
            fail("files left beside the profile: %s" % left)
        times = {}
        for line in open(out):
            if line.startswith("#") or not line.strip():
                continue
            m = re.match(r'^layer\{"name":"([^"]+)","op":"([^"]+)"\}\[(\d+)\]\[([\d,]*)\]\s+(\S+) (\S+) (\S+) (\S+)$',
                         line.rstrip("\n"))
            if not m:
                fail("malformed line: %r" % line)
            name, op, b = m.group(1), m.group(2), int(m.group(3))
            fwd, bwd, fi, bi = (float(m.group(i)) for i in range(5, 9))
            if (name, b) in times:
                fail("layer %s twice at batch %d" % (name, b))
            if not all(0 <= v < 1e4 for v in (fwd, bwd, fi, bi)):
                fail("%s at %d: times out of range: %s" % (name, b, line))
            times[(name, b)] = (op, m.group(4), fwd, bwd)
        expect_shape = {"conv1": "1,28,28", "conv2": "32,14,14", "fc1": "3136", "loss": "10"}
        for name, op in layers:
            for b in BATCHES:
                if (name, b) not in times:
                    fail("no line for layer %s at batch %d" % (name, b))
                pop, shape, fwd, bwd = times[(name, b)]
                if pop != op:
                    fail("layer %s: op %s in the profile, %s in the model" % (name, pop, op))
                if name in expect_shape and shape != expect_shape[name]:
                    fail("layer %s: input shape [%s], expected [%s]" % (name, shape, expect_shape[name]))
                if op != "flatten" and not fwd > 0:
                    fail("layer %s at %d: forward time %g" % (name, b, fwd))
                if name in with_params and not bwd > 0:
                    fail("layer %s at %d: backward time %g" % (name, b, bwd))
        if len(times) != len(layers) * len(BATCHES):
            fail("%d lines for %d layers at %d batches" % (len(times), len(layers), len(BATCHES)))

        # Read back: the planner uses exactly these times.
        for b in BATCHES:
            plan, _ = run([a.burstc, "plan", a.job, "--profile", out, "--gpus", "1", "--batch", str(b),
                           "--strategy", "dp"])
            if "measured times for 11 of 11 layers" not in plan:
                fail("the plan does not use the profile for every layer:\n" + plan)
            rows = {}
            for line in plan.splitlines():
                f = line.split()
                if len(f) >= 6 and f[1] == "1" and f[2] == "0" and f[3] == str(b):
                    rows[f[0]] = (float(f[4]), float(f[5]))
            for name, _ in layers:
                _, _, fwd, bwd = times[(name, b)]
                if name not in rows:
                    fail("layer %s missing from the plan at batch %d" % (name, b))
                pf, pb = rows[name]
                if abs(pf - fwd) > 6e-5 or abs(pb - bwd) > 6e-5:
                    fail("layer %s at %d: plan says %.4f/%.4f ms, profile %.6f/%.6f" %
                         (name, b, pf, pb, fwd, bwd))
    print("ok: %d layers at batches %s measured and read back" % (len(layers), BATCHES))


if __name__ == "__main__":
    main()
