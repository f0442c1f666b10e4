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
  frozen   both ranks of the second host are stopped with SIGSTOP mid-training (a host
           whose ranks hang; its Open MPI daemon still runs, so that mpirun can end
           the job): the job ends within 30 s, and a rank of the first host names
           the silent host and its ranks, in the watchdog's words (checked verbatim
           up to numbers and places).
  killed   every process of the second host (its Open MPI daemon and both ranks) is
           killed with SIGKILL mid-training, checkpointing every 2 steps into a folder
           local to each host: a host that dies. The job ends within 30 s; resumed on
           the same 2 hosts from the newest committed round in their folders, it gives
           the losses of an uninterrupted run bit for bit.
  launch   the launch checked against the plan: on one host (two planned nodes share
           it), and on 2 hosts with the ranks dealt round-robin (mpirun --map-by node:
           a planned node on two hosts), every rank exits 2 and rank 0 says so with
           the mapping that matches, verbatim; with --allow-mismatched-launch the
           one-host run trains, and says it runs anyway.

The one-host runs of the 2-node plan pass --allow-mismatched-launch.

Exit 77 (skipped) where the hosts cannot be emulated (no root, no namespaces). A run
still going HANG_S seconds after it started is a hang and fails the check; the time
each run took is printed.
"""
import argparse
import filecmp
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1",
           # The runtime picks the nonblocking all-reduce's algorithm from the ranks per
           # node (core.c, mpi_defaults), and the algorithm sets the order of the sums:
           # one choice for every launch, so one host and two add in the same order.
           OMPI_MCA_coll_libnbc_iallreduce_algorithm="3")
HANG_S = int(os.environ.get("HANG_S", "150"))
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
    one = run(["mpirun", "-np", "4", "--oversubscribe", prog, "--allow-mismatched-launch"] + args +
              ["--checkpoint-dir", one_ck])
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


def host_procs(state, host, exe=None):
    """The processes of an emulated host (those in its UTS namespace), or its processes
    that run the program exe."""
    with open(os.path.join(state, host, "uts")) as f:
        ns = f.read().strip()
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.readlink("/proc/%s/ns/uts" % d) == ns and (
                        exe is None or os.readlink("/proc/%s/exe" % d) == exe):
                    out.append(int(d))
            except OSError:
                pass
    return out


def signal_all(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def start_on_hosts(emulate, state, mpirun_args, local=None):
    """A job across 2 emulated hosts of 2 ranks, running in the background, and a thread
    that collects its standard output; the lines so far are in the returned list."""
    cmd = [emulate, "--hosts", "2", "--slots", "2", "--state", state] + (
        ["--local", local] if local else []) + ["--"] + mpirun_args
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                         start_new_session=True)
    lines = []

    def read():
        for line in p.stdout:
            lines.append(line)
    threading.Thread(target=read, daemon=True).start()
    return p, lines


def end_group(p):
    """Ends whatever of a job started by start_on_hosts still runs (mpirun, daemons, ranks)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def wait_for_step(p, lines, step, what):
    start = time.monotonic()
    while not any(l.startswith("step %d loss" % step) for l in list(lines)):
        if p.poll() is not None:
            err = p.communicate()[1]
            if p.returncode == SKIP:
                sys.stderr.write(err)
                sys.exit(SKIP)
            fail("%s ended before step %d (status %d):\n%s" % (what, step, p.returncode, err))
        if time.monotonic() - start > HANG_S:
            end_group(p)
            fail("%s did not reach step %d in %d s" % (what, step, HANG_S))
        time.sleep(0.1)


# The watchdog's message for a host that hangs, verbatim but for the numbers and places.
# The watchdog's message for a host that hangs, verbatim but for the numbers and places
# (where() in runtime/watchdog.c).
WHERE = (r"(at step \d+|between steps \(after step \d+\)|in a phase outside the steps \(after step "
         r"\d+\)|saving the checkpoint after step \d+|loading a checkpoint|in start-up \(before the "
         r"first step\)|in rt_finalize)( in '[^']*')?( \(waiting in [^()]*\))?")
FROZEN_MSG = (r"burstrt: rank [01]: watchdog: node ehost1 \(ranks 2-3\) has sent no heartbeat for "
              r"[0-9.]+ s: its ranks stopped or were killed, or the host is down; its last said rank "
              r"[23] was %s; this rank waits for it %s; aborting the job \(if ranks are legitimately "
              r"this slow, raise --step-timeout\)" % (WHERE, WHERE))


def check_frozen(emulate, prog, tmp):
    state = os.path.join(tmp, "hosts")
    p, lines = start_on_hosts(emulate, state, ["-np", "4", prog, "--iterations", "100000", "--data",
                                               "synthetic", "--step-timeout", "5"])
    frozen = []
    try:
        wait_for_step(p, lines, 3, "the 2-host run")
        frozen = host_procs(state, "ehost1", os.path.realpath(prog))
        if len(frozen) != 2:
            fail("expected the 2 ranks of ehost1, found processes %s" % frozen)
        signal_all(frozen, signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            _, err = p.communicate(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            signal_all(frozen, signal.SIGKILL)
            end_group(p)
            fail("the job still runs %d s after its second host froze:\n%s" % (HANG_S, p.communicate()[1]))
        took = time.monotonic() - t0
    finally:
        signal_all(frozen, signal.SIGKILL)
        if p.poll() is None:
            end_group(p)
        for host in ("ehost0", "ehost1"):
            signal_all(host_procs(state, host), signal.SIGKILL)
    print("frozen: the job ended %.1f s after the second host froze (status %d)" % (took, p.returncode))
    if p.returncode == 0:
        fail("the job exited 0 after its second host froze:\n" + err)
    named = [l for l in err.splitlines() if re.fullmatch(FROZEN_MSG, l)]
    if not named:
        fail("no rank of the first host named the frozen host in the watchdog's words:\n" + err)
    if took > 30:
        fail("the job took %.1f s to end after its second host froze (at most 30 s):\n%s" % (took, err))
    print(named[0])


def check_killed(emulate, prog, tmp):
    state, local = os.path.join(tmp, "hosts"), os.path.join(tmp, "local")
    ck = os.path.join(local, "ck")
    args = ["--data", "synthetic", "--checkpoint-dir", ck, "--checkpoint-every", "2"]
    p, lines = start_on_hosts(emulate, state, ["-np", "4", prog, "--iterations", "100000"] + args, local)
    killed = []
    try:
        wait_for_step(p, lines, 5, "the 2-host run")
        killed = host_procs(state, "ehost1")
        signal_all(killed, signal.SIGKILL)
        t0 = time.monotonic()
        try:
            _, err = p.communicate(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            end_group(p)
            fail("the job still runs %d s after its second host died:\n%s" % (HANG_S, p.communicate()[1]))
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            end_group(p)
        for host in ("ehost0", "ehost1"):
            signal_all(host_procs(state, host), signal.SIGKILL)
    said = [l for l in err.splitlines() if "lost communication" in l or "watchdog" in l]
    print("killed: the job ended %.1f s after its second host died (status %d)%s" %
          (took, p.returncode, (": " + said[0].strip()) if said else ""))
    if p.returncode == 0:
        fail("the job exited 0 after its second host died:\n" + err)
    if took > 30:
        fail("the job took %.1f s to end after its second host died (at most 30 s):\n%s" % (took, err))
    # The newest committed round: rank 0's marker, in the first host's folder.
    ck0 = os.path.join(state, "ehost0", "local", "ck")
    rounds = sorted(int(d[5:]) for d in os.listdir(ck0)
                    if d.startswith("step-") and os.path.exists(os.path.join(ck0, d, "COMMIT")))
    if not rounds:
        fail("no committed checkpoint round in the first host's folder: %s" % os.listdir(ck0))
    start = rounds[-1]
    for host, ranks in (("ehost0", (0, 1)), ("ehost1", (2, 3))):
        where = os.path.join(state, host, "local", "ck", "step-%012d" % start)
        for r in ranks:
            if not os.path.exists(os.path.join(where, "rank-%d.ckpt" % r)):
                fail("%s's folder lacks rank %d's file of the round of step %d" % (host, r, start))
    end = start + 3
    again = on_hosts(emulate, state, local, ["-np", "4", prog, "--iterations", str(end), "--resume"] + args)
    if again.returncode:
        fail("the resumed 2-host run failed:\n" + again.stderr)
    whole = run(["mpirun", "-np", "4", "--oversubscribe", prog, "--allow-mismatched-launch", "--iterations",
                 str(end), "--data", "synthetic"])
    if whole.returncode:
        fail("the uninterrupted run failed:\n" + whole.stderr)
    a, b = loss_lines(whole.stdout)[start:], loss_lines(again.stdout)
    if len(b) != end - start or a != b:
        fail("the resumed losses differ from the uninterrupted run's (from step %d):\nuninterrupted:\n%s\n"
             "resumed:\n%s" % (start, "\n".join(a), "\n".join(b)))
    print("killed: resumed from the round of step %d in each host's folder, the losses of the"
          " uninterrupted run bit for bit (%s)" % (start, b[-1]))


def launch_msg(level, hosts, why):
    return ("burstrt: %s: the launch does not match the plan: the plan's cluster has 2 nodes of 2 ranks, "
            "in rank order (ranks 0-1 on the first node), but the ranks run on %s, so %s; launch 2 ranks "
            "per host on 2 hosts (mpirun -np 4 --map-by ppr:2:node, or srun --nodes=2 --ntasks-per-node=2)"
            % (level, hosts, why))


def check_launch(emulate, prog, tmp):
    me = socket.gethostname()
    args = ["--iterations", "1", "--data", "synthetic"]
    one = run(["mpirun", "-np", "4", "--oversubscribe", prog] + args)
    want = launch_msg("error", "1 host (%s: ranks 0-3)" % me, "ranks 0 and 2 of two planned nodes share host "
                      + me) + ", or pass --allow-mismatched-launch to run anyway"
    if one.returncode != 2 or want not in one.stderr.splitlines() or loss_lines(one.stdout):
        fail("one host: expected exit 2 and\n%s\ngot %d:\n%s%s" % (want, one.returncode, one.stderr, one.stdout))
    anyway = run(["mpirun", "-np", "4", "--oversubscribe", prog, "--allow-mismatched-launch"] + args)
    want_w = launch_msg("warning", "1 host (%s: ranks 0-3)" % me, "ranks 0 and 2 of two planned nodes share "
                        "host " + me) + "; running anyway (--allow-mismatched-launch)"
    if anyway.returncode or want_w not in anyway.stderr.splitlines() or len(loss_lines(anyway.stdout)) != 1:
        fail("one host, --allow-mismatched-launch: expected a run and\n%s\ngot %d:\n%s" %
             (want_w, anyway.returncode, anyway.stderr))
    dealt = on_hosts(emulate, os.path.join(tmp, "hosts"), None, ["-np", "4", "--map-by", "node", prog] + args)
    want_d = launch_msg("error", "2 hosts (ehost0: ranks 0, 2; ehost1: ranks 1, 3)",
                        "ranks 0 and 1 of one planned node run on two hosts (ehost0, ehost1)") + \
        ", or pass --allow-mismatched-launch to run anyway"
    if dealt.returncode != 2 or want_d not in dealt.stderr.splitlines():
        fail("2 hosts round-robin: expected exit 2 and\n%s\ngot %d:\n%s" % (want_d, dealt.returncode, dealt.stderr))
    print("launch: one host and a round-robin launch on 2 hosts end with the matching mapping:\n%s\n%s"
          % (want, want_d))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--emulate", required=True, help="scripts/emulate-hosts")
    ap.add_argument("check", choices=["losses", "frozen", "killed", "launch"])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "prog")
        b = subprocess.run([a.burstc, "build", a.job, "-o", prog], capture_output=True, text=True)
        if b.returncode:
            fail("burstc build failed:\n" + b.stderr)
        {"losses": check_losses, "frozen": check_frozen, "killed": check_killed,
         "launch": check_launch}[a.check](a.emulate, prog, tmp)


if __name__ == "__main__":
    main()
