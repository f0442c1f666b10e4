"""What the data tests (images_data.py, npy_data.py, tokens_gpt.py) share: running
a generated program under mpirun as root on a small machine, reading its losses and
test accuracy, and Fashion-MNIST's idx files as Debian's dataset-fashion-mnist ships
them (read by the script that makes the example jobs' data)."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "jobs"))
from make_example_data import FMNIST, idx  # noqa: E402,F401 (used by the data tests)

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
