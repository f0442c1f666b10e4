#!/usr/bin/python3
"""bench_cli.py: the whole `burstc rank` command, timed as a user meets it (not a test).

usage: bench_cli.py FILE [--runs N] [--cold] [--args "..."] NAME=BURSTC [NAME=BURSTC ...]

Runs `BURSTC rank FILE ARGS` N times for each binary, interleaved (A B A B ...) so
that every binary meets the same load, each run a fresh process.  With --cold the
file is dropped from the page cache before every run (posix_fadvise DONTNEED: only
this file, not the whole cache), so reading it comes from the disk.  Prints, per
binary: the median, min and max wall time, the median user and system CPU time
(system time is mostly page faults), the peak resident memory, the exit status; and,
for a binary that knows --verbose, the median of each phase it reports.  The load
average (uptime) is printed before and after, and with every run in --log.

Example (docs/ranking.md):
  tests/bench/rank/bench_cli.py /tmp/rank_big.csv --runs 7 --args "-k 100 --regularize 0.5" \
      before=/tmp/burstc.before after=build/release/tools/burstc
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def run(binary, path, args, verbose):
    cmd = [binary, "rank", path] + args + (["--verbose"] if verbose else [])
    with tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", errors="replace")
    phases = {}
    for line in stderr.splitlines():
        m = re.match(r"burstc rank: (\w+) +([0-9.]+) s \(cpu +([0-9.]+) s(?:, \+ *([0-9]+) MiB)?\)",
                     line)
        if m:
            phases[m.group(1)] = (float(m.group(2)), float(m.group(3)),
                                  float(m.group(4)) if m.group(4) else 0.0)
    return {
        "wall": wall,
        "user": ru.ru_utime,
        "sys": ru.ru_stime,
        "rss": ru.ru_maxrss / 1024,  # Linux reports KiB
        "status": p.returncode,
        "phases": phases,
        "stderr": stderr,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("binaries", nargs="+", help="NAME=PATH")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--args", default="-k 100")
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--log", default=None, help="append every run to this file")
    opt = ap.parse_args()
    bins = [b.split("=", 1) for b in opt.binaries]
    args = opt.args.split()
    verbose = {}
    for name, path in bins:
        h = subprocess.run([path, "rank", "--help"], capture_output=True, text=True).stdout
        verbose[name] = "--verbose" in h
    print("file %s (%d bytes), args: %s, %d runs each, %s page cache; load before: %s; %d cores"
          % (opt.file, os.path.getsize(opt.file), opt.args, opt.runs,
             "cold (file dropped)" if opt.cold else "warm", load(), os.cpu_count()))
    results = {name: [] for name, _ in bins}
    loads = []
    for r in range(opt.runs):
        for name, path in bins:
            if opt.cold:
                drop_cache(opt.file)
            l0 = load()
            res = run(path, opt.file, args, verbose[name])
            res["load"] = l0
            loads.append(float(l0.split()[0]))
            results[name].append(res)
            if opt.log:
                with open(opt.log, "a") as f:
                    f.write("%s run %d load %s wall %.2f user %.2f sys %.2f status %d\n%s"
                            % (name, r, l0, res["wall"], res["user"], res["sys"], res["status"],
                               res["stderr"]))
    print("load after: %s; 1-minute load at the runs' starts: min %.2f, median %.2f, max %.2f"
          % (load(), min(loads), statistics.median(loads), max(loads)))
    print()
    print("%-10s %8s %8s %8s %8s %8s %9s %6s" % ("binary", "median_s", "min_s", "max_s",
                                                 "user_s", "sys_s", "peak_MiB", "status"))
    for name, _ in bins:
        rs = results[name]
        walls = [x["wall"] for x in rs]
        print("%-10s %8.2f %8.2f %8.2f %8.2f %8.2f %9.0f %6s"
              % (name, statistics.median(walls), min(walls), max(walls),
                 statistics.median(x["user"] for x in rs), statistics.median(x["sys"] for x in rs),
                 max(x["rss"] for x in rs), ",".join(sorted({str(x["status"]) for x in rs}))))
    for name, _ in bins:
        rs = results[name]
        names = []
        for x in rs:
            for k in x["phases"]:
                if k not in names:
                    names.append(k)
        if not names:
            continue
        print()
        print("%s, median of each phase (--verbose):" % name)
        print("%-8s %8s %8s %10s" % ("phase", "wall_s", "cpu_s", "touched_MiB"))
        for k in names:
            vals = [x["phases"][k] for x in rs if k in x["phases"]]
            print("%-8s %8.2f %8.2f %10.0f" % (k, statistics.median(v[0] for v in vals),
                                               statistics.median(v[1] for v in vals),
                                               statistics.median(v[2] for v in vals)))


if __name__ == "__main__":
    main()
