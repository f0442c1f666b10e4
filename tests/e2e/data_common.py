"""What the data tests (images_data.py, npy_data.py, tokens_gpt.py) share: running
a generated program under mpirun as root on a small machine, reading its losses and
test accuracy, and Fashion-MNIST's idx files as Debian's dataset-fashion-mnist ships
them."""
import gzip
import os
import re
import subprocess
import sys

import numpy as np

FMNIST = "/usr/share/datasets/fashion-mnist"
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1")


def fail(msg):
    sys.stderr.write(msg + "\n")
    sys.exit(1)


def run(cmd, **kw):
    """Runs cmd, failing the test (with its output) if it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        fail("%s failed (%d):\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def mpirun(np_, prog, args, check=True):
    r = subprocess.run(["mpirun", "-np", str(np_), "--oversubscribe", prog] + args, capture_output=True,
                       text=True, env=ENV, timeout=600)
    if check and r.returncode:
        fail("%s %s failed (%d):\n%s%s" % (prog, " ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def losses(out):
    """The program's "step N loss X" lines, as printed (exact comparisons)."""
    return [m.group(1) for m in re.finditer(r"^step \d+ loss (\S+)$", out, re.M)]


def accuracy(out):
    """(accuracy, samples) of its "test accuracy" line, as printed; None without one."""
    m = re.search(r"^test accuracy (\S+) \((\d+) samples\)$", out, re.M)
    return m and m.groups()


def idx(name):
    """An idx file of Fashion-MNIST as a uint8 array of its shape."""
    with gzip.open(os.path.join(FMNIST, name)) as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)
