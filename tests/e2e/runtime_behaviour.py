#!/usr/bin/env python3
"""End-to-end behaviour of a generated program beyond its losses: resuming
from a checkpoint, and failing cleanly.

    runtime_behaviour.py --burstc BURSTC --job JOB.burst CHECK

CHECK is one of:
  resume      train 10 steps checkpointing every 5, train 5 and stop, resume to
              10: the resumed losses must equal the uninterrupted run's.
  dead-rank   kill one rank mid-run: every rank must exit non-zero, mpirun must
              name that rank and the others say where they stopped.
  hung-rank   stop (SIGSTOP) one rank mid-run: the others must abort with the
              watchdog's message naming that rank and its step.
  hung-start  one rank stops during start-up (BURSTRT_TEST_FAULT=stop-in-startup):
              the others' watchdog names it.
  hung-resume one rank stops while the others load a checkpoint (--resume,
              BURSTRT_TEST_FAULT=stop-in-load): the others' watchdog names it.
  kill-save   kill one rank in the middle of a checkpoint round
              (BURSTRT_TEST_FAULT=kill-in-save): the job fails naming it, the
              previous round survives, and resuming from it gives the
              uninterrupted run's losses.
  few-ranks   launch a 4-rank plan on 2 ranks: a clear error, non-zero exit.
  bad-data    point --data fmnist at a missing folder: a clear error naming the
              path before training starts.
  bad-output  an unwritable --checkpoint-dir and --trace: a clear error naming
              the path before training starts.
  bad-options out-of-range option values (--step-timeout beyond 1e9 or not a number,
              --slowdown below 1): the option's error, before training starts
              (--step-timeout 1e300 used to arm the watchdog with an overflowed
              limit, which fired during start-up instead).
  accuracy    train the job's one epoch of Fashion-MNIST on one rank (the same
              losses as its plans on 4, which e2e.fmnist_* check): the test-set
              accuracy (evaluated with batchnorm's running statistics and dropout
              off) must be at least 85%.

The faulty runs must end; how fast is not judged here (a loaded machine sets it):
a run still going 150 s after its fault is a hang and fails the check, and the
time each took is printed. tests/bench/runtime/startup_stop.py measures the time to
the end under load (issue 31). The runs that must succeed use the default limit.
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


def mpirun(np, prog, args, timeout=300, env=None):
    return subprocess.run(["mpirun", "-np", str(np), "--oversubscribe", prog] + args, capture_output=True,
                          text=True, env=env or ENV, timeout=timeout)


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


def rank_of(pid):
    """The MPI rank of a process that mpirun started, from its environment."""
    with open("/proc/%d/environ" % pid, "rb") as f:
        for var in f.read().split(b"\0"):
            if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                return int(var.split(b"=", 1)[1])
    fail("no OMPI_COMM_WORLD_RANK in the environment of process %d" % pid)


def kill_leftovers(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def watchdog_line(err, rank, where):
    """The watchdog's line that names `rank` as the one that stopped, `where` it stood."""
    pat = r"^burstrt: rank \d+: watchdog: rank %d (\(this rank\) )?stopped making progress [0-9.]+ s ago, %s" % (rank, where)
    m = re.search(pat, err, re.M)
    if not m:
        fail("no watchdog line matching %r:\n%s" % (pat, err))
    return err[m.start():err.index("\n", m.start())]


HANG_S = 150  # a faulty run still going this long after its fault is a hang


def run_with_fault(prog, args, env, timeout=HANG_S):
    """Runs the job to its end; returns (result, seconds, pids of its ranks)."""
    p = subprocess.Popen(["mpirun", "-np", "4", "--oversubscribe", prog] + args, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    t0 = time.time()
    pids = []
    while time.time() < t0 + 10 and len(pids) < 4 and p.poll() is None:
        time.sleep(0.2)
        pids = rank_pids(p.pid, prog)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        kill_leftovers(rank_pids(p.pid, prog) + pids)
        fail("the job was still running %d s after it started" % timeout)
    kill_leftovers(pids)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err), time.time() - t0


def check_fault(prog, how):
    p = subprocess.Popen(["mpirun", "-np", "4", "--oversubscribe", prog, "--iterations", "100000",
                          "--step-timeout", "10"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=ENV)
    deadline = time.time() + HANG_S
    pids = []
    while time.time() < deadline and len(pids) < 4:
        time.sleep(0.5)
        pids = rank_pids(p.pid, prog)
    if len(pids) < 4:
        p.kill()
        fail("could not find the 4 ranks' processes")
    time.sleep(3)   # let it train a few steps
    victim = pids[2]
    rank = rank_of(victim)
    os.kill(victim, signal.SIGKILL if how == "dead-rank" else signal.SIGSTOP)
    t0 = time.time()
    try:
        out, err = p.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        p.kill()
        kill_leftovers(rank_pids(p.pid, prog) + pids)
        fail("%s: the job was still running %d s after the fault" % (how, HANG_S))
    took = time.time() - t0
    kill_leftovers(pids)
    if p.returncode == 0:
        fail("%s: the job exited 0" % how)
    if how == "dead-rank":
        # (OpenMPI 4.1 prints "PID 0" there, so the rank is what identifies it.)
        if not re.search(r"process rank %d with PID \d+ .*exited on signal 9" % rank, err):
            fail("dead-rank: mpirun did not name the dead rank %d (pid %d):\n%s" % (rank, victim, err))
        if not re.search(r"^burstrt: rank (?!%d:)\d+: stopped (at step \d+|in start-up): the job was terminated" % rank, err, re.M):
            fail("dead-rank: no surviving rank said where it stopped:\n" + err)
        said = "mpirun named rank %d" % rank
    else:
        # Mid-run on an idle machine; on a loaded one the 3 s may end inside start-up.
        said = watchdog_line(err, rank, r"(at step \d+|in start-up)")
    print("%s: every rank exited non-zero %.1f s after the fault: %s" % (how, took, said))


def check_hung_start(prog):
    env = dict(ENV, BURSTRT_TEST_FAULT="stop-in-startup@2")
    r, took = run_with_fault(prog, ["--iterations", "100", "--step-timeout", "5"], env)
    if r.returncode == 0:
        fail("hung-start: exit %d after %.1f s" % (r.returncode, took))
    print("hung-start: exit %d after %.1f s: %s" % (r.returncode, took,
                                                    watchdog_line(r.stderr, 2, r"in start-up")))


def check_hung_resume(prog, tmp):
    ck = os.path.join(tmp, "ck")
    first = mpirun(4, prog, ["--iterations", "3", "--checkpoint-dir", ck])
    if first.returncode:
        fail("hung-resume: the run that writes the checkpoint failed:\n" + first.stderr)
    env = dict(ENV, BURSTRT_TEST_FAULT="stop-in-load@2")
    r, took = run_with_fault(prog, ["--iterations", "6", "--checkpoint-dir", ck, "--resume",
                                    "--step-timeout", "5"], env)
    if r.returncode == 0:
        fail("hung-resume: exit %d after %.1f s" % (r.returncode, took))
    print("hung-resume: exit %d after %.1f s: %s" % (r.returncode, took,
                                                     watchdog_line(r.stderr, 2, r"loading a checkpoint")))


def check_kill_save(prog, tmp):
    whole = mpirun(4, prog, ["--iterations", "15"])
    if whole.returncode:
        fail("kill-save: uninterrupted run failed:\n" + whole.stderr)
    ck = os.path.join(tmp, "ck")
    env = dict(ENV, BURSTRT_TEST_FAULT="kill-in-save@2:10")
    killed = mpirun(4, prog, ["--iterations", "15", "--checkpoint-dir", ck, "--checkpoint-every", "5"], env=env)
    if killed.returncode == 0 or not re.search(r"process rank 2 with PID \d+ .*exited on signal 9", killed.stderr):
        fail("kill-save: expected rank 2 to die in the round of step 10:\n" + killed.stderr)
    if not os.path.exists(os.path.join(ck, "step-000000000005", "COMMIT")):
        fail("kill-save: the complete round of step 5 is gone: %s" % os.listdir(ck))
    if os.path.exists(os.path.join(ck, "step-000000000010", "COMMIT")):
        fail("kill-save: the interrupted round of step 10 was committed")
    resumed = mpirun(4, prog, ["--iterations", "15", "--checkpoint-dir", ck, "--resume"])
    if resumed.returncode:
        fail("kill-save: resuming failed:\n" + resumed.stderr)
    a, b = losses(whole.stdout), losses(resumed.stdout)
    if sorted(b) != list(range(5, 15)):
        fail("kill-save: the resumed run ran steps %s, expected 5..14" % sorted(b))
    for s in range(5, 15):
        if a[s] != b[s]:
            fail("kill-save: step %d: loss %s uninterrupted, %s resumed" % (s, a[s], b[s]))
    if sorted(os.listdir(ck)) != ["step-000000000015"]:
        fail("kill-save: old rounds left behind: %s" % sorted(os.listdir(ck)))
    print("kill-save: a rank killed in the round of step 10 left the round of step 5, and resuming"
          " from it gives the uninterrupted losses of steps 5-14")


def check_bad_output(prog, tmp):
    blocker = os.path.join(tmp, "a-file")
    open(blocker, "w").close()
    for opt, path, why in (("--checkpoint-dir", os.path.join(blocker, "ck"), "Not a directory"),
                           ("--trace", os.path.join(tmp, "no-such-dir", "t.json"), "No such file or directory")):
        r = mpirun(4, prog, ["--iterations", "2", opt, path], timeout=HANG_S)
        line = next((l for l in r.stderr.splitlines() if path in l), "")
        if r.returncode == 0 or why not in line or "step 0" in r.stdout:
            fail("bad-output: expected an error naming %s (%s) before training, got %d:\n%s%s"
                 % (path, why, r.returncode, r.stdout, r.stderr))
        print("bad-output: " + line)


def check_bad_options(prog):
    for args, expect in ((["--step-timeout", "1e300"], "--step-timeout expects seconds from 0 to 1e+09"),
                         (["--step-timeout", "1e10"], "--step-timeout expects seconds from 0 to 1e+09"),
                         (["--step-timeout", "nan"], "--step-timeout expects seconds from 0 to 1e+09"),
                         (["--slowdown", "0.5"], "--slowdown expects a number >= 1")):
        r = mpirun(4, prog, ["--iterations", "2"] + args, timeout=HANG_S)
        line = next((l for l in r.stderr.splitlines() if expect in l), "")
        if r.returncode == 0 or not line or "watchdog" in r.stderr or "step 0" in r.stdout:
            fail("bad-options: %s: expected '%s' before training, got %d:\n%s%s"
                 % (" ".join(args), expect, r.returncode, r.stdout, r.stderr))
        print("bad-options: " + line)


def check_accuracy(prog):
    try:
        r = mpirun(1, prog, ["--data", "fmnist"], timeout=850)
    except subprocess.TimeoutExpired:
        fail("accuracy: one epoch did not finish within 850 s (a loaded machine? rerun this test)")
    if r.returncode:
        fail("accuracy: the run failed:\n" + r.stderr)
    m = re.search(r"^test accuracy (\S+) \((\d+) samples\)$", r.stdout, re.M)
    if not m or int(m.group(2)) < 9000:
        fail("accuracy: no test accuracy over the test set in the output:\n" + r.stdout[-2000:])
    steps = len(losses(r.stdout))
    if steps < 938:
        fail("accuracy: trained %d steps, not one epoch (938)" % steps)
    if float(m.group(1)) < 0.85:
        fail("accuracy: %s after one epoch, expected at least 0.85" % m.group(1))
    print("accuracy: %s on %s test samples after %d steps (one epoch)" % (m.group(1), m.group(2), steps))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("check", choices=["resume", "dead-rank", "hung-rank", "hung-start", "hung-resume",
                                      "kill-save", "few-ranks", "bad-data", "bad-output", "bad-options",
                                      "accuracy"])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "prog")
        one = ["--gpus", "1", "--strategy", "dp"] if a.check == "accuracy" else []
        b = subprocess.run([a.burstc, "build", a.job, "-o", prog] + one, capture_output=True, text=True)
        if b.returncode:
            fail("burstc build failed:\n" + b.stderr)
        if a.check == "resume":
            check_resume(prog, tmp)
        elif a.check in ("dead-rank", "hung-rank"):
            check_fault(prog, a.check)
        elif a.check == "hung-start":
            check_hung_start(prog)
        elif a.check == "hung-resume":
            check_hung_resume(prog, tmp)
        elif a.check == "kill-save":
            check_kill_save(prog, tmp)
        elif a.check == "bad-output":
            check_bad_output(prog, tmp)
        elif a.check == "bad-options":
            check_bad_options(prog)
        elif a.check == "accuracy":
            check_accuracy(prog)
        elif a.check == "few-ranks":
            r = mpirun(2, prog, ["--iterations", "2"], timeout=HANG_S)
            if r.returncode == 0 or "launched with 2" not in r.stderr:
                fail("few-ranks: expected an error about the rank count, got %d:\n%s" % (r.returncode, r.stderr))
            print("few-ranks: " + next(l for l in r.stderr.splitlines() if "launched with 2" in l))
        else:
            missing = os.path.join(tmp, "no-such-folder")
            r = mpirun(4, prog, ["--iterations", "2", "--data", "fmnist:" + missing], timeout=HANG_S)
            if r.returncode == 0 or missing not in r.stderr or "step 0" in r.stdout:
                fail("bad-data: expected an error naming %s before training, got %d:\n%s%s"
                     % (missing, r.returncode, r.stdout, r.stderr))
            print("bad-data: " + next(l for l in r.stderr.splitlines() if missing in l))


if __name__ == "__main__":
    main()
