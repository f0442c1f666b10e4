#!/usr/bin/env python3
"""burstc profile end to end: measure the Fashion-MNIST job on this machine at two
small per-GPU batches, then require that the written profile

  - has one `layer` line per layer of the model (burstc stats lists them) at each
    batch, the op and per-sample input shape of that layer, finite times, a
    positive forward time for every layer with work, a positive backward time for
    every layer with parameters;
  - has a line for each input (op input, a positive forward time, no backward)
    and one `optimizer` line per batch with the model's parameter count (burstc
    stats) and a positive update time;
  - is read back by `burstc plan --profile`, which says it covers every layer,
    both inputs and the optimizer, and whose one-GPU plan at each measured batch
    shows exactly the measured forward and backward times of every layer (to the
    table's four decimals), the layer that consumes an input first with the
    input's time added to its forward, and every layer with its share of the
    update (its parameters over the model's) added to its backward;
  - was written atomically (no temporary file left beside it);
  - skipped, with a note, a third batch too large for the GPU's memory.

With --data job the programs read the job's own data: one batch measured on the
Fashion-MNIST dataset says so in its header and has every line; --data
fmnist:DIR with a folder that does not exist fails with the program's message
naming it, and writes nothing (the option reaches the programs).
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


def check_lines(text, want, what):
    """A profile of one batch: `want` layer lines and one optimizer line."""
    got = len(re.findall(r"^layer\{", text, re.M))
    if got != want or len(re.findall(r"^optimizer\{", text, re.M)) != 1:
        fail("%s: %d layer lines, expected %d" % (what, got, want))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--job", required=True)
    a = ap.parse_args()

    # The model's layers, their ops and per-sample shapes, from burstc stats.
    stats, _ = run([a.burstc, "stats", a.job])
    layers = []  # (name, op)
    inputs = []
    params = {}
    for line in stats.splitlines()[1:]:
        m = re.match(r"^(\S+)\s+(\S+)\s+\w+\[N(?:,([\d,]+))?\]\s+([\d,]+)\s", line)
        if m:
            (inputs if m.group(2) == "input" else layers).append((m.group(1), m.group(2)))
            params[m.group(1)] = int(m.group(4).replace(",", ""))
    if len(layers) != 11 or [n for n, _ in inputs] != ["x", "y"]:
        fail("expected the 11 layers and inputs x, y of fmnist_cnn in burstc stats, got %s %s" %
             (layers, inputs))
    total = sum(params.values())
    if total != 421642:
        fail("burstc stats: %d parameters, expected fmnist_cnn's 421,642" % total)
    with_params = {n for n, op in layers if op in ("conv2d", "linear")}

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "fmnist.profile")
        # 2^30 samples do not fit the `cpu` device's 4 GiB: skipped with a note.
        _, err = run([a.burstc, "profile", a.job, "--batches", ",".join(map(str, BATCHES)) + ",1073741824",
                      "--warmup", "1", "--repeat", "3", "-o", out])
        if "11 layers, 2 inputs and the optimizer's update at 2 batches written" not in err:
            fail("unexpected summary:\n" + err)
        if "note: batch 1073741824 skipped: layer" not in err:
            fail("no note for the batch that does not fit:\n" + err)
        if "# batch 1073741824 skipped: layer" not in open(out).read():
            fail("no '# batch ... skipped' line in the profile")
        left = [f for f in os.listdir(tmp) if f != "fmnist.profile"]
        if left:
            fail("files left beside the profile: %s" % left)
        times = {}
        update = {}
        for line in open(out):
            if line.startswith("#") or not line.strip():
                continue
            m = re.match(r'^optimizer\{"op":"sgd","params":(\d+)\}\[(\d+)\]\[\]\s+(\S+) (\S+)$', line.rstrip("\n"))
            if m:
                if int(m.group(1)) != total:
                    fail("optimizer line with %s parameters, the model has %d" % (m.group(1), total))
                b, ms = int(m.group(2)), float(m.group(3))
                if b in update or not 0 < ms < 1e4:
                    fail("optimizer line twice or out of range: %s" % line)
                update[b] = ms
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
        for name, _ in inputs:
            for b in BATCHES:
                if (name, b) not in times:
                    fail("no line for input %s at batch %d" % (name, b))
                pop, shape, fwd, bwd = times[(name, b)]
                if pop != "input" or shape != "" or not fwd > 0 or bwd != 0:
                    fail("input %s at %d: %s [%s] %g %g" % (name, b, pop, shape, fwd, bwd))
        if len(times) != (len(layers) + len(inputs)) * len(BATCHES):
            fail("%d lines for %d layers and inputs at %d batches" %
                 (len(times), len(layers) + len(inputs), len(BATCHES)))
        if sorted(update) != list(BATCHES):
            fail("optimizer lines at batches %s, expected %s" % (sorted(update), BATCHES))
        first_use = {"conv1": "x", "loss": "y"}  # the layer that consumes each input first

        # Read back: the planner uses exactly these times.
        for b in BATCHES:
            plan, _ = run([a.burstc, "plan", a.job, "--profile", out, "--gpus", "1", "--batch", str(b),
                           "--strategy", "dp"])
            if "measured times for 11 of 11 layers, 2 inputs, the optimizer's update" not in plan:
                fail("the plan does not use the profile for every layer:\n" + plan)
            rows = {}
            for line in plan.splitlines():
                f = line.split()
                if len(f) >= 6 and f[1] == "1" and f[2] == "0" and f[3] == str(b):
                    rows[f[0]] = (float(f[4]), float(f[5]))
            for name, _ in layers:
                _, _, fwd, bwd = times[(name, b)]
                if name in first_use:
                    fwd += times[(first_use[name], b)][2]
                bwd += update[b] * params[name] / total
                if name not in rows:
                    fail("layer %s missing from the plan at batch %d" % (name, b))
                pf, pb = rows[name]
                if abs(pf - fwd) > 6e-5 or abs(pb - bwd) > 6e-5:
                    fail("layer %s at %d: plan says %.4f/%.4f ms, profile %.6f/%.6f" %
                         (name, b, pf, pb, fwd, bwd))
        # Two copies at once (--concurrent 2), one round: the same lines, and the
        # header says how it was measured.
        out2 = os.path.join(tmp, "fmnist2.profile")
        _, err = run([a.burstc, "profile", a.job, "--batches", "2", "--concurrent", "2", "--rounds",
                      "1", "--warmup", "1", "--repeat", "2", "-o", out2])
        text = open(out2).read()
        if "1 round of 1 warm-up + 2 timed steps per batch, 2 copies at once" not in text:
            fail("--concurrent 2: unexpected header:\n" + text[:400])
        check_lines(text, len(layers) + len(inputs), "--concurrent 2")
        # --data job: the job's own data (its dataset), one batch, one round.
        out3 = os.path.join(tmp, "fmnist_job.profile")
        run([a.burstc, "profile", a.job, "--data", "job", "--batches", "32", "--rounds", "1",
             "--warmup", "1", "--repeat", "2", "-o", out3])
        text = open(out3).read()
        if not text.splitlines()[0].endswith("1 copy at once, data the job's"):
            fail("--data job: unexpected header:\n" + text[:400])
        check_lines(text, len(layers) + len(inputs), "--data job")
        # The data reach the programs: a dataset folder that does not exist fails
        # the run with the program's message naming it, and nothing is written.
        missing = os.path.join(tmp, "no-such-data")
        bad = os.path.join(tmp, "m.profile")
        p = subprocess.run([a.burstc, "profile", a.job, "--data", "fmnist:" + missing, "--batches",
                            "4", "--rounds", "1", "--warmup", "1", "--repeat", "1", "-o", bad],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 1 or "no-such-data" not in p.stderr:
            fail("--data fmnist:MISSING: exit %d, expected 1 naming the folder:\n%s" %
                 (p.returncode, p.stderr[-800:]))
        if os.path.exists(bad):
            fail("--data fmnist:MISSING: a failed profile was written")
    print("ok: %d layers at batches %s measured and read back; --data reaches the programs"
          % (len(layers), BATCHES))


if __name__ == "__main__":
    main()
