#!/usr/bin/env python3
"""End-to-end check of `burstc tune --runner exec`: real programs under mpirun.

1. Three candidate plans of the Fashion-MNIST job on two ranks, three
   comparisons (one round of the complete graph): the tuner builds them, runs them head to head, and reports exactly the
   comparisons it made (table, --json, --comparisons agree; every winner's
   measured throughput is above its loser's); the winner's planned IR (-o)
   builds with `burstc build` and trains.
2. A candidate whose runs crash (a launcher that kills it): it is reported
   with its exit status and ranked last, the other one wins, exit status 0.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile


def fail(msg):
    sys.stderr.write("tune_exec: " + msg + "\n")
    sys.exit(1)


def run(cmd, env, timeout=300, ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if ok and p.returncode != 0:
        fail("command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--input", required=True)
    a = ap.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               BURSTC_LAUNCH="mpirun --oversubscribe -np {np}")
    common = ["--runner", "exec", "--gpus", "2", "--candidates", "2", "--steps", "4",
              "--warmup", "1", "--data", "synthetic", "--budget", "1200s"]
    with tempfile.TemporaryDirectory() as d:
        best, js, cmp = (os.path.join(d, f) for f in ("best.ir", "t.json", "c.txt"))
        p = run([a.burstc, "tune", a.input, "--max-comparisons", "3", "-o", best, "--json", js,
                 "--comparisons", cmp] + common + ["--candidates", "3"], env)
        t = json.load(open(js))
        lines = [l for l in open(cmp) if l.strip() and not l.startswith("#")]
        made = int(re.search(r"made (\d+) in", p.stdout).group(1))
        if not (t["comparisons"] == 3 == len(t["trials"]) == len(lines) == made):
            fail("comparison counts disagree: json %d, trials %d, lines %d, table %d"
                 % (t["comparisons"], len(t["trials"]), len(lines), made))
        if t["runs"] != 6 or sum(c["wins"] for c in t["candidates"]) != 3:
            fail("runs %d, wins %d" % (t["runs"], sum(c["wins"] for c in t["candidates"])))
        for tr in t["trials"]:
            if not tr["winner_metric"] >= tr["loser_metric"] > 0:
                fail("a trial's winner measured less than its loser: %s" % tr)
        if any(c["failure"] for c in t["candidates"]) or t["ranked"] != 3:
            fail("a candidate failed: %s" % t["candidates"])
        if t["stop"] != "comparison limit":
            fail("stopped for '%s'" % t["stop"])
        prog = os.path.join(d, "best")
        run([a.burstc, "build", best, "-o", prog], env)
        p = run(["mpirun", "--oversubscribe", "-np", "2", prog, "--iterations", "2", "--data",
                 "synthetic"], env)
        if not re.search(r"^step 1 loss \S+$", p.stdout, re.M):
            fail("the winner's program did not train:\n" + p.stdout)
        print("ok: 3 comparisons, winner %s, its IR builds and trains" % t["winner"])

        # 2. a crashing candidate
        wrapper = os.path.join(d, "launch.sh")
        with open(wrapper, "w") as f:
            f.write('#!/bin/sh\nnp=$1\nshift\ncase "$1" in\n*/cand-0) echo "rank 0: segfault" >&2; exit 139 ;;\nesac\n'
                    'exec mpirun --oversubscribe -np "$np" "$@"\n')
        os.chmod(wrapper, 0o755)
        env2 = dict(env, BURSTC_LAUNCH=wrapper + " {np}")
        js2 = os.path.join(d, "t2.json")
        p = run([a.burstc, "tune", a.input, "--max-comparisons", "1", "--json", js2] + common,
                env2)
        t = json.load(open(js2))
        last = t["candidates"][-1]
        if last["id"] != 0 or "exit status 139" not in (last["failure"] or "") \
                or "segfault" not in last["failure"]:
            fail("the crashing candidate is not last with its reason: %s" % t["candidates"])
        if t["ranked"] != 1 or t["winner"] != t["candidates"][0]["name"] \
                or t["candidates"][0]["id"] != 1:
            fail("the other candidate did not win: %s" % t)
        if "failed:" not in p.stdout or "1 of 2 candidates failed" not in p.stderr:
            fail("the failure is not reported:\n" + p.stdout + p.stderr)
        print("ok: crashing candidate ranked last: %s" % last["failure"])


if __name__ == "__main__":
    main()
