#!/usr/bin/python3
"""Slurm launches of a generated program, on a one-machine Slurm that the test sets up
(scripts/slurm-local: slurmctld and slurmd on this host, PMIx).

    slurm.py --burstc BURSTC --job JOB.burst --slurm-local SLURM-LOCAL --sbatch SCRIPT one
    slurm.py --burstc BURSTC --job JOB2x2.burst --slurm-local SLURM-LOCAL multinode

one: JOB is a plan of one node of 4 ranks (examples/jobs/fmnist_cpu.burst), on a Slurm
of one node:
  srun     `srun -n 4 PROG` trains with the losses of `mpirun -np 4 PROG`, bit for bit;
  sbatch   the example batch script (examples/slurm/train.sbatch), submitted with
           --nodes=1 --ntasks-per-node=4 and waited for, gives the same losses and
           leaves its checkpoint in CKPT_DIR.
multinode: JOB2x2 is a plan of 2 nodes of 2 ranks (tests/e2e/fmnist_2x2.burst), on a
Slurm of 2 nodes emulated on this host (scripts/slurm-local start DIR 2):
  `srun --nodes=2 --ntasks-per-node=2 PROG` gives the losses of the one-host run bit for
  bit, and with `-m cyclic` (ranks dealt round-robin) every rank exits 2 and rank 0
  names the srun mapping that matches, verbatim.

Exit 77 (skipped) where Slurm is not installed or cannot start here (no root).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1",
           # The all-reduce's algorithm sets the order of the sums: one for both launchers
           # (mpirun tells the runtime the node's ranks before MPI_Init, srun does not).
           OMPI_MCA_coll_libnbc_iallreduce_algorithm="3")
HANG_S = 150
SKIP = 77


def fail(msg):
    sys.stderr.write(msg + "\n")
    sys.exit(1)


def run(cmd, env=ENV):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=HANG_S)
    except subprocess.TimeoutExpired:
        fail("still running %d s after it started: %s" % (HANG_S, " ".join(cmd)))


def loss_lines(out):
    return re.findall(r"^step \d+ loss \S+$", out, re.M)


def start(slurm_local, where, nodes):
    up = run([slurm_local, "start", where, str(nodes)])
    if up.returncode == SKIP:
        sys.stderr.write(up.stderr)
        sys.exit(SKIP)
    if up.returncode:
        fail("the one-machine Slurm did not start:\n" + up.stderr)
    return dict(ENV, SLURM_CONF=os.path.join(where, "slurm.conf"), OMPI_MCA_btl_tcp_if_include="lo",
                OMPI_MCA_btl="tcp,vader,self")


def multinode(a):
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "prog")
        b = subprocess.run([a.burstc, "build", a.job, "-o", prog], capture_output=True, text=True)
        if b.returncode:
            fail("burstc build failed:\n" + b.stderr)
        args = ["--iterations", "4", "--data", "synthetic"]
        ref = run(["mpirun", "-np", "4", "--oversubscribe", prog, "--allow-mismatched-launch"] + args)
        want = loss_lines(ref.stdout)
        if ref.returncode or len(want) != 4:
            fail("the one-host mpirun run failed:\n" + ref.stderr)
        sl = os.path.join(tmp, "slurm")
        env = start(a.slurm_local, sl, 2)
        try:
            got = run(["srun", "--nodes=2", "--ntasks-per-node=2", prog] + args, env)
            if got.returncode or loss_lines(got.stdout) != want:
                fail("srun --nodes=2 --ntasks-per-node=2: status %d, losses\n%s\nexpected (one host)\n%s\n%s" %
                     (got.returncode, "\n".join(loss_lines(got.stdout)), "\n".join(want), got.stderr))
            print("multinode: srun on 2 Slurm nodes x 2 tasks gives the one-host losses bit for bit (%s)" % want[-1])
            dealt = run(["srun", "--nodes=2", "--ntasks-per-node=2", "-m", "cyclic", prog] + args, env)
            msg = ("burstrt: error: the launch does not match the plan: the plan's cluster has 2 nodes of 2 ranks, "
                   "in rank order (ranks 0-1 on the first node), but the ranks run on 2 hosts (n0: ranks 0, 2; "
                   "n1: ranks 1, 3), so ranks 0 and 1 of one planned node run on two hosts (n0, n1); launch 2 "
                   "ranks per host on 2 hosts (mpirun -np 4 --map-by ppr:2:node, or srun --nodes=2 "
                   "--ntasks-per-node=2), or pass --allow-mismatched-launch to run anyway")
            if dealt.returncode != 2 or msg not in dealt.stderr.splitlines():
                fail("srun -m cyclic: expected exit 2 and\n%s\ngot %d:\n%s" % (msg, dealt.returncode, dealt.stderr))
            print("multinode: srun -m cyclic is refused: " + msg)
        finally:
            run([a.slurm_local, "stop", sl])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--slurm-local", required=True)
    ap.add_argument("--sbatch")
    ap.add_argument("check", choices=["one", "multinode"])
    a = ap.parse_args()
    if a.check == "multinode":
        return multinode(a)
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "prog")
        b = subprocess.run([a.burstc, "build", a.job, "-o", prog], capture_output=True, text=True)
        if b.returncode:
            fail("burstc build failed:\n" + b.stderr)
        args = ["--iterations", "4", "--data", "synthetic"]
        ref = run(["mpirun", "-np", "4", "--oversubscribe", prog] + args)
        if ref.returncode or len(loss_lines(ref.stdout)) != 4:
            fail("the mpirun run failed:\n" + ref.stderr)
        want = loss_lines(ref.stdout)
        sl = os.path.join(tmp, "slurm")
        env = start(a.slurm_local, sl, 1)
        try:
            got = run(["srun", "-n", "4", prog] + args, env)
            if got.returncode or loss_lines(got.stdout) != want:
                fail("srun -n 4: status %d, losses\n%s\nexpected (mpirun -np 4)\n%s\n%s" %
                     (got.returncode, "\n".join(loss_lines(got.stdout)), "\n".join(want), got.stderr))
            print("srun: srun -n 4 gives the losses of mpirun -np 4 bit for bit (%s)" % want[-1])
            out, ck = os.path.join(tmp, "batch.out"), os.path.join(tmp, "ck")
            batch = run(["sbatch", "--wait", "--nodes=1", "--ntasks-per-node=4", "--output=" + out,
                         a.sbatch, prog] + args, dict(env, CKPT_DIR=ck))
            with open(out) if os.path.exists(out) else open(os.devnull) as f:
                text = f.read()
            if batch.returncode or loss_lines(text) != want:
                fail("sbatch %s: status %d, output:\n%s\n%s" % (a.sbatch, batch.returncode, text, batch.stderr))
            if not os.path.exists(os.path.join(ck, "step-%012d" % 4, "COMMIT")):
                fail("sbatch: no committed checkpoint of step 4 in CKPT_DIR (%s)" % ck)
            print("sbatch: the example script gives the same losses and its checkpoint")
        finally:
            run([a.slurm_local, "stop", sl])


if __name__ == "__main__":
    main()
