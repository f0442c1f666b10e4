#!/usr/bin/env python3
"""End-to-end loss scaling on the CPU backend (docs/runtime.md, "Loss scaling").

    loss_scale.py --burstc BURSTC --f16 fmnist_f16.burst --f32 fmnist_cpu.burst

The f16 job is the f32 job with dtype f16 (same model). Both are built with
--strategy dp, one plan on 4 ranks: burst plans the two dtypes differently (the
f16 job's transfers are half the bytes), and another plan sums in another order,
so its losses would agree only to rounding.
The CPU backend computes in f32 whatever the dtype, so:

  exact     the f16 program scales by default (dynamic, 65536) and trains to
            the same losses as with --loss-scale off and as the f32 job's
            program, bit for bit: multiplying by a power of two and dividing
            again is exact. The f32 program does not scale by default.
  skip      an inf written into one rank's gradient at step 2
            (BURSTRT_TEST_FAULT=inf-grad): rank 0 reports the step skipped and
            the scale halved, once; losses up to step 2 are the clean run's, and
            later ones differ (the step's update is missing) on every rank
            alike, else the job would not finish consistently. The f32 program
            given the same fault does not scale, so it neither checks nor skips.
  resume    with a skip at step 3, --loss-scale-init 1024 and
            --loss-scale-interval 4, 10 steps uninterrupted and 5 + 5 resumed
            from the checkpoint end with the same scale and clean-step count
            (which differ from a fresh scaler's), and the same losses.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1")


def fail(msg):
    sys.stderr.write(msg + "\n")
    sys.exit(1)


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env or ENV, timeout=600)
    if p.returncode != 0:
        fail("command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
    return p


def mpirun(prog, args, fault=None):
    env = dict(ENV)
    if fault:
        env["BURSTRT_TEST_FAULT"] = fault
    return run(["mpirun", "-np", "4", "--oversubscribe", prog] + args, env=env)


def losses(out):
    return [m.group(2) for m in re.finditer(r"^step (\d+) loss (\S+)$", out, re.M)]


SKIP = re.compile(r"^burstrt: rank (\d+): loss_scale: step (\d+): inf or nan in the gradients at "
                  r"loss scale (\S+): the step is skipped; the scale is now (\S+)$", re.M)
END = re.compile(r"^burstrt: rank (\d+): loss_scale: dynamic scale (\S+) at the end \((\d+) clean "
                 r"steps since it last changed\); (\d+) steps skipped in this run$", re.M)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--f16", required=True)
    ap.add_argument("--f32", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        p16, p32 = os.path.join(tmp, "f16"), os.path.join(tmp, "f32")
        run([a.burstc, "build", "--strategy", "dp", a.f16, "-o", p16])
        run([a.burstc, "build", "--strategy", "dp", a.f32, "-o", p32])
        base = ["--iterations", "10", "--data", "synthetic"]

        # exact
        on = mpirun(p16, base)
        off = mpirun(p16, base + ["--loss-scale", "off"])
        f32 = mpirun(p32, base)
        l16, loff, l32 = losses(on.stdout), losses(off.stdout), losses(f32.stdout)
        if len(l16) != 10:
            fail("the f16 program printed %d losses:\n%s" % (len(l16), on.stdout))
        if l16 != loff or l16 != l32:
            fail("losses differ:\nf16 scaled   %s\nf16 unscaled %s\nf32          %s" % (l16, loff, l32))
        ends = END.findall(on.stderr)
        if ends != [("0", "65536", "10", "0")] or SKIP.search(on.stderr):
            fail("the f16 program should scale by default (65536, 10 clean steps, none skipped):\n"
                 + on.stderr)
        if "loss_scale" in off.stderr or "loss_scale" in f32.stderr:
            fail("loss scaling is on with --loss-scale off or in the f32 program:\n%s%s"
                 % (off.stderr, f32.stderr))

        # skip
        sk = mpirun(p16, base, fault="inf-grad@3:2")
        skips = SKIP.findall(sk.stderr)
        if skips != [("0", "2", "65536", "32768")]:
            fail("expected rank 0 alone to report step 2 skipped (65536 -> 32768), got %s:\n%s"
                 % (skips, sk.stderr))
        if "rank 3: loss_scale: BURSTRT_TEST_FAULT" not in sk.stderr:
            fail("the fault was not injected on rank 3:\n" + sk.stderr)
        lsk = losses(sk.stdout)
        if lsk[:3] != l16[:3] or lsk[3] == l16[3] or len(lsk) != 10:
            fail("a skipped step 2 should leave steps 0-2 as the clean run's and change step 3:\n"
                 "clean   %s\nskipped %s" % (l16, lsk))
        if END.findall(sk.stderr) != [("0", "32768", "7", "1")]:
            fail("after the skip: expected scale 32768, 7 clean steps, 1 skipped:\n" + sk.stderr)
        f32f = mpirun(p32, base, fault="inf-grad@3:2")
        if losses(f32f.stdout) != l32 or "loss_scale" in f32f.stderr:
            fail("the f32 program checked its gradients:\n" + f32f.stderr)

        # resume
        ck = os.path.join(tmp, "ck")
        sc = ["--loss-scale-init", "1024", "--loss-scale-interval", "4"]
        whole = mpirun(p16, base + sc, fault="inf-grad@3:3")
        first = mpirun(p16, ["--iterations", "5", "--data", "synthetic", "--checkpoint-dir", ck,
                             "--checkpoint-every", "5"] + sc, fault="inf-grad@3:3")
        second = mpirun(p16, base + sc + ["--checkpoint-dir", ck, "--resume"], fault="inf-grad@3:3")
        # 0-2 clean (3 counted), 3 skipped (512), 4 clean: checkpoint (512, 1); 5-7 clean:
        # 1024 at 7; 8-9: 2 counted. A fresh scaler at 5 would end at 2048, 1 counted.
        want = ("0", "1024", "2", "0")
        if END.findall(whole.stderr) != [("0", "1024", "2", "1")]:
            fail("uninterrupted run: " + whole.stderr)
        if END.findall(first.stderr) != [("0", "512", "1", "1")]:
            fail("first half: " + first.stderr)
        if END.findall(second.stderr) != [want]:
            fail("the resumed run did not continue the checkpointed scale (want scale 1024, 2 "
                 "clean steps):\n" + second.stderr)
        lw, lr = losses(whole.stdout), losses(second.stdout)
        if lr != lw[5:]:
            fail("resumed losses %s, uninterrupted %s" % (lr, lw[5:]))
    print("loss scaling: the f16 job scales by default and trains to the f32 job's losses bit for "
          "bit; an inf on rank 3 skips the step everywhere (reported once, 65536 -> 32768); a "
          "resumed run continues the checkpointed scale (1024, 2 clean steps) and the losses")


if __name__ == "__main__":
    main()
