#!/usr/bin/python3
"""A rank stopped at a random moment of start-up, many times, on a loaded machine.

Issue 31: a 4-rank program one of whose ranks is SIGSTOPped within a second
or two of `mpirun` starting must end, every time, within 30 s, with the
watchdog's message. This script runs that R times (default 200): it launches
`mpirun -np 4 PROG --iterations 100000`, waits a random delay from 0 to
--max-delay seconds (default 2), stops a random rank with SIGSTOP (as soon as
its process exists, when it does not yet), and waits for the job to end.
Meanwhile --cpu processes spin and --io processes write and fsync a file
(default 2 and 1), so the ranks run on a loaded machine the whole time.

For each run it records where the stopped process stood (its stage: 'exec'
before the re-execution that sets OPENBLAS_CORETYPE, 'loader' after it, with
one thread; 'watchdog' once the watchdog thread runs; 'mpi' once MPI_Init
has started its threads), the seconds from the stop to the job's end, the
exit status and the watchdog's line. A run that has not ended 30 s after the
stop is a hang: the script prints every process of the job (state, threads,
wchan, and a gdb backtrace of each thread of each rank), kills the job and
counts it. The table at the end: runs, hangs, runs without a watchdog message,
and the median and largest time from the stop to the end, per stage.

    /usr/bin/python3 tests/bench/runtime/startup_stop.py [--burstc build/test/tools/burstc]
        [--runs 200] [--max-delay 2] [--cpu 2] [--io 1] [--limit 30] [--seed 1]
"""
import argparse
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


def children(pid):
    """Every descendant of pid, from /proc."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    except OSError:
        return {}


def ranks(mpirun_pid, exe):
    """rank -> pid of the job's program processes that exist now."""
    found = {}
    for pid in children(mpirun_pid):
        try:
            if os.readlink("/proc/%d/exe" % pid) != exe:
                continue
        except OSError:
            continue
        r = environ(pid).get(b"OMPI_COMM_WORLD_RANK")
        if r is not None:
            found[int(r)] = pid
    return found


def stage(pid):
    """Where a stopped process stands, from its environment and threads."""
    try:
        threads = len(os.listdir("/proc/%d/task" % pid))
    except OSError:
        return "gone"
    if threads >= 3:
        return "mpi"
    if threads == 2:
        return "watchdog"
    return "loader" if b"OPENBLAS_CORETYPE" in environ(pid) else "exec"


def describe(pids):
    """State, threads, wchan and backtraces of the processes of a hung job."""
    lines = []
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                st = f.read()
            comm = st[st.index("(") + 1:st.rindex(")")]
            state = st.rsplit(")", 1)[1].split()[0]
            with open("/proc/%d/wchan" % pid) as f:
                wchan = f.read()
            threads = len(os.listdir("/proc/%d/task" % pid))
        except OSError:
            continue
        lines.append("  pid %d %s state %s threads %d wchan %s" % (pid, comm, state, threads, wchan))
        if state != "T":
            bt = subprocess.run(["gdb", "-q", "-batch", "-p", str(pid), "-ex", "thread apply all bt 12"],
                                capture_output=True, text=True, timeout=60).stdout
            lines += ["    " + l for l in bt.splitlines() if l.startswith(("#", "Thread"))]
    return "\n".join(lines)


def load(cpu, io, tmp):
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cpu)]
    for i in range(io):
        path = os.path.join(tmp, "io%d" % i)
        procs.append(subprocess.Popen(["sh", "-c", "while :; do dd if=/dev/zero of=%s bs=1M count=64 "
                                       "conv=fsync status=none; done" % path]))
    return procs


def one_run(prog, delay, victim, limit):
    t0 = time.monotonic()
    p = subprocess.Popen(["mpirun", "-np", "4", "--oversubscribe", prog, "--iterations", "100000"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    exe = os.path.realpath(prog)
    pid = None
    while p.poll() is None:
        now = time.monotonic() - t0
        if now >= delay:
            pid = ranks(p.pid, exe).get(victim)
            if pid:
                break
        time.sleep(0.005)
    if pid is None:
        err = p.communicate()[1].decode(errors="replace")
        return {"stage": "none", "took": 0.0, "rc": p.returncode, "msg": "", "err": err, "hang": False}
    os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    where = stage(pid)
    hang, diag = False, ""
    err = b""
    try:
        _, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        hang = True
        diag = describe([p.pid] + children(p.pid))
        for k in [p.pid] + children(p.pid):
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass
        _, err = p.communicate()
    took = time.monotonic() - stopped
    for k in children(p.pid) + [pid]:
        try:
            os.kill(k, signal.SIGKILL)
        except OSError:
            pass
    err = err.decode(errors="replace")
    m = re.search(r"^burstrt: rank \d+: watchdog: .*$", err, re.M)
    return {"stage": where, "took": took, "rc": p.returncode, "msg": m.group(0) if m else "",
            "err": err, "hang": hang, "diag": diag, "delay": stopped - t0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--burstc", default=os.path.join(TOP, "build/test/tools/burstc"))
    ap.add_argument("--prog", help="a built fmnist program (default: build it)")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--max-delay", type=float, default=2.0)
    ap.add_argument("--cpu", type=int, default=2)
    ap.add_argument("--io", type=int, default=1)
    ap.add_argument("--limit", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        prog = args.prog
        if not prog:
            prog = os.path.join(tmp, "fmnist")
            subprocess.run([args.burstc, "build", os.path.join(TOP, "examples/jobs/fmnist_cpu.burst"),
                            "-o", prog], check=True)
        loaders = load(args.cpu, args.io, tmp)
        results = []
        try:
            for i in range(args.runs):
                r = one_run(prog, rng.uniform(0, args.max_delay), rng.randrange(4), args.limit)
                results.append(r)
                print("run %3d: stop at %.2f s (%s) -> exit %s after %.1f s%s  %s" %
                      (i + 1, r.get("delay", 0), r["stage"], r["rc"], r["took"], " HANG" if r["hang"] else "",
                       r["msg"][:150]), flush=True)
                if r["hang"]:
                    print(r["diag"] + "\n  stderr:\n" + r["err"][-3000:], flush=True)
                elif not r["msg"] and r["stage"] != "none":
                    print("  no watchdog message; stderr:\n" + r["err"][-1500:], flush=True)
        finally:
            for q in loaders:
                q.kill()
                q.wait()
    print("\nload at the end: " + open("/proc/loadavg").read().strip())
    print("%-10s %5s %6s %8s %9s %9s" % ("stage", "runs", "hangs", "no msg", "median s", "max s"))
    for st in ("exec", "loader", "watchdog", "mpi", "gone", "none", "all"):
        rs = [r for r in results if st == "all" or r["stage"] == st]
        if not rs:
            continue
        took = [r["took"] for r in rs if r["stage"] != "none"] or [0.0]
        print("%-10s %5d %6d %8d %9.1f %9.1f" % (st, len(rs), sum(r["hang"] for r in rs),
                                                sum(not r["msg"] and r["stage"] != "none" for r in rs),
                                                statistics.median(took), max(took)))
    bad = sum(r["hang"] or r["took"] > args.limit or (not r["msg"] and r["stage"] != "none") for r in results)
    print("%d of %d runs ended within %.0f s with a watchdog message" % (len(results) - bad, len(results), args.limit))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
