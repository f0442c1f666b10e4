#!/usr/bin/env python3
"""End-to-end check of a burst-parallel plan: build a job with burstc, train it
under mpirun on several ranks, train the same model on one rank, and require
the per-iteration losses to agree within a relative tolerance.

This is the strongest test of a plan's resharding and gradient sums: any
sample that goes to the wrong rank, any gradient summed twice or missed,
shows up in the losses within a few iterations.

The planned program is built by both code generators (LLVM, the default, and
C): the two must print the same losses and write the same checkpoint, bit for
bit, since they make the same runtime calls in the same order.
"""
import filecmp
import argparse
import os
import re
import subprocess
import sys
import tempfile


def run(cmd, env=None, timeout=600):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if p.returncode != 0:
        sys.stderr.write("command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
        sys.exit(1)
    return p.stdout


def losses(out):
    vals = [float(m.group(2)) for m in re.finditer(r"^step (\d+) loss (\S+)$", out, re.M)]
    if not vals:
        sys.stderr.write("no losses in the output:\n" + out)
        sys.exit(1)
    return vals


def loss_lines(out):
    return re.findall(r"^step \d+ loss \S+$", out, re.M)


def same_tree(a, b):
    """Whether folders a and b hold the same files with the same bytes."""
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(same_tree(os.path.join(a, d), os.path.join(b, d))
                                               for d in cmp.common_dirs)


def unplanned(text):
    """A planned module's text without its plan: no rank sets, and no comm ops (a
    reshard's users read its operand instead; an allreduce goes)."""
    source = {}
    for m in re.finditer(r"^\s*%([\w.]+) = reshard %([\w.]+)", text, re.M):
        source[m.group(1)] = source.get(m.group(2), m.group(2))
    text = re.sub(r"^\s*%[\w.]+ = (reshard|allreduce) .*\n", "", text, flags=re.M)
    text = re.sub(r"%([\w.]+)", lambda m: "%" + source.get(m.group(1), m.group(1)), text)
    return re.sub(r" @\[[^\]]*\]", "", text)


def mpirun(np, prog, args):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1")
    return run(["mpirun", "-np", str(np), "--oversubscribe", prog] + args, env=env)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--input", required=True, help="a job (.burst) or a planned module (.ir)")
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--strategy", default="burst")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--data", default="synthetic")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--min-sets", type=int, default=1,
                    help="fail unless the plan uses at least this many distinct rank-set sizes")
    a = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        prog, ref = os.path.join(tmp, "prog"), os.path.join(tmp, "ref")
        planned = run([a.burstc, "--strategy", a.strategy, a.input])
        sizes = set()
        for m in re.finditer(r"@\[([^\]]*)\]", planned):
            n = 0
            for part in m.group(1).split(","):
                lo, _, hi = part.strip().partition("..")
                n += int(hi) - int(lo) + 1 if hi else 1
            sizes.add(n)
        if len(sizes) < a.min_sets:
            sys.stderr.write("the %s plan uses rank sets of sizes %s; the test needs %d different sizes\n%s"
                             % (a.strategy, sorted(sizes), a.min_sets, planned))
            sys.exit(1)
        progc = os.path.join(tmp, "prog_c")
        run([a.burstc, "build", "--codegen=llvm", "--strategy", a.strategy, a.input, "-o", prog])
        run([a.burstc, "build", "--codegen=c", "--strategy", a.strategy, a.input, "-o", progc])
        ref_input = a.input
        if a.input.endswith(".ir"):
            # A planned module keeps its plan; the reference is the same module unplanned.
            ref_input = os.path.join(tmp, "unplanned.ir")
            with open(a.input) as f, open(ref_input, "w") as out:
                out.write(unplanned(f.read()))
        run([a.burstc, "build", "--strategy", "dp", "--gpus", "1", ref_input, "-o", ref])
        args = ["--iterations", str(a.iterations), "--data", a.data]
        ckpt = ["--checkpoint-every", str(a.iterations), "--checkpoint-dir"]
        out = mpirun(a.np, prog, args + ckpt + [os.path.join(tmp, "ckpt_llvm")])
        outc = mpirun(a.np, progc, args + ckpt + [os.path.join(tmp, "ckpt_c")])
        got = losses(out)
        want = losses(mpirun(1, ref, args))
        if loss_lines(out) != loss_lines(outc):
            sys.stderr.write("the LLVM-built program's losses differ from the C-built one's:\n%s\n%s"
                             % ("\n".join(loss_lines(out)), "\n".join(loss_lines(outc))))
            sys.exit(1)
        if not same_tree(os.path.join(tmp, "ckpt_llvm"), os.path.join(tmp, "ckpt_c")):
            sys.stderr.write("the LLVM-built and C-built programs wrote different checkpoints\n")
            sys.exit(1)

    if len(got) != len(want):
        sys.stderr.write("%d losses on %d ranks, %d on one\n" % (len(got), a.np, len(want)))
        sys.exit(1)
    worst = 0.0
    if os.environ.get("E2E_VERBOSE"):
        for i, (g, w) in enumerate(zip(got, want)):
            print("step %d  %.9g  %.9g  %.3g" % (i, g, w, abs(g - w) / max(abs(w), 1e-30)))
    for i, (g, w) in enumerate(zip(got, want)):
        rel = abs(g - w) / max(abs(w), 1e-30)
        worst = max(worst, rel)
        if rel > a.rtol:
            sys.stderr.write("step %d: loss %.9g on %d ranks, %.9g on one (relative difference %.3g > %g)\n"
                             % (i, g, a.np, w, rel, a.rtol))
            sys.exit(1)
    print("%s plan (rank sets of sizes %s): %d losses match the one-rank run; worst relative difference %.3g;"
          " the LLVM-built and C-built programs agree bit for bit (losses, checkpoint)"
          % (a.strategy, sorted(sizes), len(got), worst))


if __name__ == "__main__":
    main()
