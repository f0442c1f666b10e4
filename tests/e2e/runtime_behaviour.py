#!/usr/bin/env python3
"""End-to-end behaviour of a generated program beyond its losses: resuming
from a checkpoint, and failing cleanly.

    runtime_behaviour.py --burstc BURSTC --job JOB.burst CHECK

CHECK is one of:
  resume      train 10 steps checkpointing every 5, train 5 and stop, resume to
              10: the resumed losses must equal the uninterrupted run's.
  dead-rank   kill one rank mid-run: every rank must exit non-zero within 30 s.
  hung-rank   stop (SIGSTOP) one rank mid-run: the others must abort within
              30 s with a message naming the rank and the step.
  few-ranks   launch a 4-rank plan on 2 ranks: a clear error, non-zero exit.
  bad-data    point --data fmnist at a missing folder: a clear error naming the
              path before training starts.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1")


def fail(msg):
    sys.stderr.write(msg + "\n")
    sys.exit(1)


def mpirun(np, prog, args, timeout=300):
    return subprocess.run(["mpirun", "-np", str(np), "--oversubscribe", prog] + args, capture_output=True,
                          text=True, env=ENV, timeout=timeout)


def losses(out):
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^step (\d+) loss (\S+)$", out, re.M)}


def check_resume(prog, tmp):
    whole = mpirun(4, prog, ["--iterations", "10"])
    if whole.returncode:
        fail("uninterrupted run failed:\n" + whole.stderr)
    ck = os.path.join(tmp, "ck")
    first = mpirun(4, prog, ["--iterations", "5", "--checkpoint-dir", ck, "--checkpoint-every", "5"])
    if first.returncode:
        fail("first half failed:\n" + first.stderr)
    second = mpirun(4, prog, ["--iterations", "10", "--checkpoint-dir", ck, "--resume"])
    if second.returncode:
        fail("resumed run failed:\n" + second.stderr)
    a, b = losses(whole.stdout), losses(second.stdout)
    if sorted(b) != list(range(5, 10)):
        fail("the resumed run ran steps %s, expected 5..9" % sorted(b))
    for s in range(5, 10):
        if a[s] != b[s]:
            fail("step %d: loss %s uninterrupted, %s resumed" % (s, a[s], b[s]))
    print("resume: steps 5-9 after resuming equal the uninterrupted run bit for bit")


def rank_pids(mpirun_pid, prog):
    """The pids of the program's processes started by this mpirun."""
    out = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout
    children = {}
    for line in out.splitlines()[1:]:
        pid, ppid, args = line.split(None, 2)
        children.setdefault(int(ppid), []).append((int(pid), args))
    found, todo = [], [mpirun_pid]
    while todo:
        for pid, args in children.get(todo.pop(), []):
            todo.append(pid)
            if args.startswith(prog):
                found.append(pid)
    return sorted(found)


def check_fault(prog, how):
    p = subprocess.Popen(["mpirun", "-np", "4", "--oversubscribe", prog, "--iterations", "100000",
                          "--step-timeout", "10"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=ENV)
    deadline = time.time() + 60
    pids = []
    while time.time() < deadline and len(pids) < 4:
        time.sleep(0.5)
        pids = rank_pids(p.pid, prog)
    if len(pids) < 4:
        p.kill()
        fail("could not find the 4 ranks' processes")
    time.sleep(3)   # let it train a few steps
    victim = pids[2]
    os.kill(victim, signal.SIGKILL if how == "dead-rank" else signal.SIGSTOP)
    t0 = time.time()
    try:
        out, err = p.communicate(timeout=45)
    except subprocess.TimeoutExpired:
        p.kill()
        os.kill(victim, signal.SIGKILL)
        fail("%s: the job was still running 45 s after the fault" % how)
    took = time.time() - t0
    if how == "hung-rank":
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if p.returncode == 0:
        fail("%s: the job exited 0" % how)
    if took > 30:
        fail("%s: the job took %.1f s to exit after the fault" % (how, took))
    if how == "dead-rank" and not re.search(r"process rank \d+ .*exited on signal 9", err):
        fail("dead-rank: mpirun did not name the dead rank:\n" + err)
    if how == "dead-rank" and not re.search(r"burstrt: rank \d+: stopped at step \d+", err):
        fail("dead-rank: no surviving rank said where it stopped:\n" + err)
    if how == "hung-rank" and not re.search(r"rank \d+", err):
        fail("hung-rank: no message naming a rank:\n" + err)
    if how == "hung-rank" and "step" not in err:
        fail("hung-rank: no message naming the step:\n" + err)
    said = [l for l in err.splitlines() if l.startswith("burstrt:")] or \
        [l for l in err.splitlines() if re.search(r"rank \d+", l)]
    print("%s: every rank exited non-zero %.1f s after the fault: %s" % (how, took, said[0] if said else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("check", choices=["resume", "dead-rank", "hung-rank", "few-ranks", "bad-data"])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "prog")
        b = subprocess.run([a.burstc, "build", a.job, "-o", prog], capture_output=True, text=True)
        if b.returncode:
            fail("burstc build failed:\n" + b.stderr)
        if a.check == "resume":
            check_resume(prog, tmp)
        elif a.check in ("dead-rank", "hung-rank"):
            check_fault(prog, a.check)
        elif a.check == "few-ranks":
            r = mpirun(2, prog, ["--iterations", "2"], timeout=60)
            if r.returncode == 0 or "launched with 2" not in r.stderr:
                fail("few-ranks: expected an error about the rank count, got %d:\n%s" % (r.returncode, r.stderr))
            print("few-ranks: " + next(l for l in r.stderr.splitlines() if "launched with 2" in l))
        else:
            missing = os.path.join(tmp, "no-such-folder")
            r = mpirun(4, prog, ["--iterations", "2", "--data", "fmnist:" + missing], timeout=60)
            if r.returncode == 0 or missing not in r.stderr or "step 0" in r.stdout:
                fail("bad-data: expected an error naming %s before training, got %d:\n%s%s"
                     % (missing, r.returncode, r.stdout, r.stderr))
            print("bad-data: " + next(l for l in r.stderr.splitlines() if missing in l))


if __name__ == "__main__":
    main()
