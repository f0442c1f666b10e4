#!/usr/bin/python3
"""End-to-end: training from NumPy arrays (--data npy:X.npy,Y.npy and the job's
data = "npy:...").

    npy_data.py --burstc BURSTC --job JOB.burst [--np N] [--iterations K]

The Fashion-MNIST training set is written with numpy as X.npy (uint8
[60000, 1, 28, 28]) and Y.npy (int64 [60000]). The job's plan on N ranks must
then give exactly the losses of `--data fmnist` (the same shuffle, the same
pixels; other labels give other losses): through `--data npy:...`, and through a copy of the job whose
`data = "npy:X.npy,Y.npy"` is built into the program (C and LLVM codegen alike).
A mismatch between the arrays and the model must fail before training starts,
naming the file.
"""
import argparse
import os
import re
import tempfile

import numpy as np

from data_common import fail, idx, losses, mpirun, run


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=12)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        x = os.path.join(tmp, "x.npy")
        y = os.path.join(tmp, "y.npy")
        np.save(x, idx("train-images-idx3-ubyte.gz").reshape(60000, 1, 28, 28))
        np.save(y, idx("train-labels-idx1-ubyte.gz").astype(np.int64))
        prog = os.path.join(tmp, "prog")
        run([a.burstc, "build", a.job, "-o", prog])
        it = ["--iterations", str(a.iterations)]
        ref = losses(mpirun(a.np, prog, it + ["--data", "fmnist"]).stdout)
        if len(ref) != a.iterations:
            fail("the fmnist run printed %d losses, expected %d" % (len(ref), a.iterations))
        got = losses(mpirun(a.np, prog, it + ["--data", "npy:%s,%s" % (x, y)]).stdout)
        if got != ref:
            fail("--data npy: losses differ from --data fmnist:\n npy    %s\n fmnist %s" % (got, ref))
        print("--data npy: %d losses equal to fmnist's (last %s)" % (len(got), got[-1]))
        # Other labels must give other losses: the equality above is about the data read.
        yr = os.path.join(tmp, "y_rolled.npy")
        np.save(yr, np.roll(np.load(y), 1))
        other = losses(mpirun(a.np, prog, it + ["--data", "npy:%s,%s" % (x, yr)]).stdout)
        if other == ref:
            fail("labels shifted by one sample gave the same losses: the program ignores its data")

        # The job's own data: a copy of the job file with data = "npy:...", imports made absolute.
        src = open(a.job).read()
        here = os.path.dirname(os.path.abspath(a.job))
        src = re.sub(r'import "([^"]+)"', lambda m: 'import "%s"' % os.path.join(here, m.group(1)), src)
        src, n = re.subn(r"data = \w+", 'data = "npy:%s,%s"' % (x, y), src)
        if n != 1:
            fail("%s: expected one data = line" % a.job)
        job = os.path.join(tmp, "job.burst")
        open(job, "w").write(src)
        for cg in ("c", "llvm"):
            p = os.path.join(tmp, "prog_" + cg)
            run([a.burstc, "build", "--codegen=" + cg, job, "-o", p])
            got = losses(mpirun(a.np, p, it).stdout)
            if got != ref:
                fail("data = \"npy:...\" (%s codegen): losses differ from fmnist's:\n npy    %s\n fmnist %s"
                     % (cg, got, ref))
            print("data = \"npy:...\" (%s codegen): the same %d losses" % (cg, len(got)))

        # Arrays that do not fit the model: an error naming the file, before any step.
        bad = os.path.join(tmp, "bad.npy")
        np.save(bad, np.zeros((100, 3, 28, 28), np.float32))
        r = mpirun(a.np, prog, it + ["--data", "npy:%s,%s" % (bad, y)], check=False)
        if r.returncode == 0 or bad not in r.stderr or "step 0" in r.stdout:
            fail("a [100,3,28,28] array should fail before training, naming it; got %d:\n%s%s"
                 % (r.returncode, r.stdout, r.stderr))
        print("bad shape: " + next(l for l in r.stderr.splitlines() if bad in l))
        np.save(bad, np.full(60000, 10, np.int32))
        r = mpirun(a.np, prog, it + ["--data", "npy:%s,%s" % (x, bad)], check=False)
        if r.returncode == 0 or bad not in r.stderr or "label 10" not in r.stderr:
            fail("labels of 10 for 10 classes should fail, naming the file; got %d:\n%s%s"
                 % (r.returncode, r.stdout, r.stderr))
        print("bad labels: " + next(l for l in r.stderr.splitlines() if bad in l))


if __name__ == "__main__":
    main()
