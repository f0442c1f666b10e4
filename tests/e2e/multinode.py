#!/usr/bin/env python3
"""Multi-node behaviour of a generated program, on hosts emulated on this machine by
scripts/emulate-hosts (own hostname, System V IPC and /dev/shm per host; TCP between
hosts over the loopback; see that script for what it does not emulate).

    multinode.py --burstc BURSTC --job JOB.burst --emulate EMULATE-HOSTS CHECK

JOB is a plan for 2 nodes of 2 ranks (tests/e2e/fmnist_2x2.burst). CHECK is one of:
  losses   the plan trained on 2 hosts x 2 ranks, with a checkpoint directory local
           to each host, gives the losses of the same program on one host bit for
           bit, and each host's folder holds its own ranks' checkpoint files, equal
           byte for byte to the one-host run's.

Exit 77 (skipped) where the hosts cannot be emulated (no root, no namespaces). A run
still going HANG_S seconds after it started is a hang and fails the check; the time
each run took is printed.
"""
import argparse
import filecmp
import os
import re
import subprocess
import sys
import tempfile

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1",
           # The runtime picks the nonblocking all-reduce's algorithm from the ranks per
           # node (core.c, mpi_defaults), and the algorithm sets the order of the sums:
           # one choice for every launch, so one host and two add in the same order.
           OMPI_MCA_coll_libnbc_iallreduce_algorithm="3")
HANG_S = 150
SKIP = 77


def fail(msg):
    sys.stderr.write(msg + "\n")
    sys.exit(1)


def run(cmd, timeout=HANG_S):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail("still running %d s after it started: %s" % (timeout, " ".join(cmd)))


def on_hosts(emulate, state, local, mpirun_args, hosts=2, slots=2):
    """A job across emulated hosts; exits 77 when they cannot be made here."""
    cmd = [emulate, "--hosts", str(hosts), "--slots", str(slots), "--state", state]
    if local:
        cmd += ["--local", local]
    r = run(cmd + ["--"] + mpirun_args)
    if r.returncode == SKIP:
        sys.stderr.write(r.stderr)
        sys.exit(SKIP)
    return r


def loss_lines(out):
    return re.findall(r"^step \d+ loss \S+$", out, re.M)


def check_losses(emulate, prog, tmp):
    args = ["--iterations", "4", "--data", "synthetic"]
    one_ck = os.path.join(tmp, "one-ck")
    one = run(["mpirun", "-np", "4", "--oversubscribe", prog] + args + ["--checkpoint-dir", one_ck])
    if one.returncode:
        fail("the one-host run failed:\n" + one.stderr)
    state, local = os.path.join(tmp, "hosts"), os.path.join(tmp, "local")
    two = on_hosts(emulate, state, local, ["-np", "4", prog] + args + ["--checkpoint-dir",
                                                                       os.path.join(local, "ck")])
    if two.returncode:
        fail("the 2-host run failed:\n" + two.stderr)
    a, b = loss_lines(one.stdout), loss_lines(two.stdout)
    if len(a) != 4 or a != b:
        fail("losses differ:\none host:\n%s\ntwo hosts:\n%s" % ("\n".join(a), "\n".join(b)))
    round_ = "step-000000000004"
    for host, ranks in (("ehost0", (0, 1)), ("ehost1", (2, 3))):
        where = os.path.join(state, host, "local", "ck", round_)
        have = sorted(f for f in os.listdir(where) if f.endswith(".ckpt"))
        want = ["rank-%d.ckpt" % r for r in ranks]
        if have != want:
            fail("%s's checkpoint folder holds %s, expected %s" % (host, have, want))
        for f in want:
            if not filecmp.cmp(os.path.join(where, f), os.path.join(one_ck, round_, f), shallow=False):
                fail("%s: %s differs from the one-host run's" % (host, f))
    print("losses: 2 hosts x 2 ranks give the one-host losses bit for bit (%s), and each host's"
          " local folder holds its ranks' checkpoints, equal to the one-host run's" % b[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--emulate", required=True, help="scripts/emulate-hosts")
    ap.add_argument("check", choices=["losses"])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "prog")
        b = subprocess.run([a.burstc, "build", a.job, "-o", prog], capture_output=True, text=True)
        if b.returncode:
            fail("burstc build failed:\n" + b.stderr)
        check_losses(a.emulate, prog, tmp)


if __name__ == "__main__":
    main()
