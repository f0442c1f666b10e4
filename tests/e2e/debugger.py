#!/usr/bin/env python3
"""A debugger in a program that burstc built through LLVM: gdb, in batch mode,
sets a breakpoint on a layer's line of the model's .burst file, and the
program must stop in that layer's forward step, then in its backward step,
with main at the job's file in the backtrace.

The program runs as one rank (planned with --gpus 1), without mpirun.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile


def fail(msg, out=""):
    sys.stderr.write(msg + "\n" + out)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--job", required=True, help="a job whose model is in an imported .burst file")
    ap.add_argument("--model", required=True, help="the model's .burst file")
    ap.add_argument("--layer", required=True, help="the layer to stop at (its statement's text)")
    a = ap.parse_args()
    gdb = shutil.which("gdb")
    if not gdb:
        fail("gdb is not installed (scripts/install-deps installs it)")
    with open(a.model) as f:
        lines = [n + 1 for n, l in enumerate(f) if l.strip().startswith(a.layer)]
    if len(lines) != 1:
        fail("'%s' is on %d lines of %s, not one" % (a.layer, len(lines), a.model))
    line = lines[0]
    model = os.path.basename(a.model)
    job_file = os.path.basename(a.job)
    job = os.path.splitext(job_file)[0]
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "prog")
        p = subprocess.run([a.burstc, "build", "--codegen=llvm", "--gpus", "1", "--strategy", "dp",
                            a.job, "-o", prog], capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            fail("burstc build failed", p.stdout + p.stderr)
        cmds = ["set pagination off", "set confirm off",
                "break %s:%d" % (model, line),
                "run --iterations 1 --data synthetic",
                "bt", "continue", "bt 1", "kill"]
        argv = [gdb, "-q", "-nx", "-batch"]
        for c in cmds:
            argv += ["-ex", c]
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        p = subprocess.run(argv + [prog], capture_output=True, text=True, timeout=240, env=env, cwd=tmp)
        out = p.stdout + p.stderr
    where = r"%s:%d" % (re.escape(model), line)
    if not re.search(r"Breakpoint 1 at 0x[0-9a-f]+: %s\. \(2 locations\)" % where, out):
        fail("gdb did not find two locations (forward, backward) for %s:%d" % (model, line), out)
    hits = re.findall(r"hit Breakpoint 1\.\d, (\w+) \(\) at (\S+)", out)
    want = ["%s_forward" % job, "%s_backward" % job]
    if [h[0] for h in hits] != want or not all(h[1].endswith(":%d" % line) and model in h[1]
                                               for h in hits):
        fail("the program stopped at %s, expected %s at %s:%d" % (hits, want, model, line), out)
    if not re.search(r"#1 +0x[0-9a-f]+ in main \(\) at \S*%s:\d+" % re.escape(job_file), out):
        fail("main is not at %s in the backtrace" % job_file, out)
    print("gdb stopped at %s:%d in %s" % (model, line, ", ".join(want)))


if __name__ == "__main__":
    main()
