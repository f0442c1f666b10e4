#!/usr/bin/env python3
"""End-to-end check of `burstc tune --runner exec` on a job with background
jobs (tests/e2e/fmnist_background.burst on two CPU ranks): real programs
under mpirun, ranked by cluster throughput.

1. Three candidates: the dp plan (no idle time takes a copy) and another
   plan both with its background copies packed (+bg) and without. The
   tuner builds them, runs three comparisons, and reports them consistently
   (table, --json, --comparisons); the metric is cluster samples/s, each
   trial's winner measured at least its loser, the packed candidate's
   programs reported background samples/s (read from their exit report),
   the unpacked ones none. The winner's planned IR (-o) carries its
   interleave section, builds, and runs its copies exactly when it won
   packed.
2. A launcher that drops the programs' background report: the packed
   candidate's runs count 0 background samples/s, and the output says so.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile


def fail(msg):
    sys.stderr.write("tune_background: " + msg + "\n")
    sys.exit(1)


def run(cmd, env, timeout=300, ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if ok and p.returncode != 0:
        fail("command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
    return p


def copies_in(ir):
    return len(re.findall(r"^\s*copy \d+ @ \d+ \{", ir, re.M))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--input", required=True)
    a = ap.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               BURSTC_LAUNCH="mpirun --oversubscribe -np {np}")
    common = ["--runner", "exec", "--gpus", "2", "--steps", "16", "--data", "synthetic",
              "--budget", "1200s"]
    with tempfile.TemporaryDirectory() as d:
        best, js, cmp = (os.path.join(d, f) for f in ("best.ir", "t.json", "c.txt"))
        p = run([a.burstc, "tune", a.input, "--candidates", "3", "--max-comparisons", "3",
                 "-o", best, "--json", js, "--comparisons", cmp] + common, env)
        t = json.load(open(js))
        if t["metric"] != "cluster" or not t["background"] or t["warmup"] != 4:
            fail("metric %s, background %s, warmup %s: expected cluster, true, 4"
                 % (t["metric"], t["background"], t["warmup"]))
        if "metric cluster samples/s" not in p.stdout:
            fail("the table does not name the cluster metric:\n" + p.stdout)
        cands = t["candidates"]
        if len(cands) != 3 or t["ranked"] != 3 or any(c["failure"] for c in cands):
            fail("expected 3 ranked candidates: %s" % cands)
        packed = [c for c in cands if c["packed"]]
        if len(packed) != 1 or packed[0]["copies"] < 1:
            fail("expected one packed candidate with copies: %s" % cands)
        pk = packed[0]
        twin = [c for c in cands if not c["packed"] and c["name"] + " +bg" == pk["name"]]
        if len(twin) != 1 or twin[0]["gpus_per_layer"] != pk["gpus_per_layer"] \
                or twin[0]["first_rank_per_layer"] != pk["first_rank_per_layer"]:
            fail("the packed plan has no unpacked twin: %s" % cands)
        # comparisons as reported, everywhere
        lines = [l for l in open(cmp) if l.strip() and not l.startswith("#")]
        made = int(re.search(r"made (\d+) in", p.stdout).group(1))
        if not (t["comparisons"] == 3 == len(t["trials"]) == len(lines) == made):
            fail("comparison counts disagree: json %d, trials %d, lines %d, table %d"
                 % (t["comparisons"], len(t["trials"]), len(lines), made))
        if t["runs"] != 6 or sum(c["wins"] for c in cands) != 3 or \
                sum(c["runs"] for c in cands) != 6:
            fail("runs %d, wins %d" % (t["runs"], sum(c["wins"] for c in cands)))
        for tr in t["trials"]:
            if not tr["winner_metric"] >= tr["loser_metric"] > 0:
                fail("a trial's winner measured less than its loser: %s" % tr)
        # the metric is fg + bg; bg comes from the packed programs' reports only
        for c in cands:
            if abs(c["mean_metric"] - (c["mean_fg"] + c["mean_bg"])) > 1e-6 * c["mean_metric"]:
                fail("mean metric is not fg + bg: %s" % c)
            if c["runs_without_background_report"] != 0:
                fail("a run printed no background report: %s" % c)
        if not pk["mean_bg"] > 0:
            fail("the packed candidate measured no background samples/s: %s" % pk)
        if any(c["mean_bg"] != 0 for c in cands if not c["packed"]):
            fail("an unpacked candidate measured background samples/s: %s" % cands)
        if t["stop"] != "comparison limit":
            fail("stopped for '%s'" % t["stop"])
        # the winner as written: its section, built and run
        ir = open(best).read()
        win = cands[0]
        if t["winner"] != win["name"] or not re.search(r"^interleave \S+ \{", ir, re.M):
            fail("best.ir has no interleave section (winner %s)" % t["winner"])
        want = win["copies"] if win["packed"] else 0
        if copies_in(ir) != want:
            fail("best.ir holds %d copies, the winner %s has %d" % (copies_in(ir), win["name"],
                                                                   want))
        if win is twin[0] and ir.count("left out: burstc tune") != pk["copies"]:
            fail("the unpacked winner's section does not say why its copies are left out")
        prog = os.path.join(d, "best")
        run([a.burstc, "build", best, "-o", prog], env)
        q = run(["mpirun", "--oversubscribe", "-np", "2", prog, "--iterations", "6", "--data",
                 "synthetic"], env)
        if not re.search(r"^step 5 loss \S+$", q.stdout, re.M):
            fail("the winner's program did not train:\n" + q.stdout)
        bgline = re.search(r"^background \S+: (\d+) cop", q.stdout, re.M)
        if bool(bgline) != (want > 0) or (bgline and int(bgline.group(1)) != want):
            fail("the winner's program runs %s background copies, expected %d:\n%s"
                 % (bgline.group(1) if bgline else "no", want, q.stdout))
        print("ok: 3 comparisons, packed %s measured %.1f bg samples/s; winner %s (%d copies), "
              "its IR builds and runs them" % (pk["name"], pk["mean_bg"], win["name"], want))

        # 2. programs whose background report is lost
        wrapper = os.path.join(d, "launch.sh")
        with open(wrapper, "w") as f:
            f.write('#!/bin/bash\nset -o pipefail\nnp=$1\nshift\n'
                    'mpirun --oversubscribe -np "$np" "$@" | grep -v "^background "\n')
        os.chmod(wrapper, 0o755)
        env2 = dict(env, BURSTC_LAUNCH=wrapper + " {np}")
        js2 = os.path.join(d, "t2.json")
        p = run([a.burstc, "tune", a.input, "--candidates", "3", "--max-comparisons", "3",
                 "--json", js2] + common, env2)
        t = json.load(open(js2))
        pk = [c for c in t["candidates"] if c["packed"]][0]
        if pk["runs"] < 1 or pk["runs_without_background_report"] != pk["runs"] \
                or pk["mean_bg"] != 0 or pk["failure"]:
            fail("the packed candidate without reports: %s" % pk)
        note = "%d of %d runs printed no background report" % (pk["runs"], pk["runs"])
        if note not in p.stdout or "counted as 0 background samples/s" not in p.stdout:
            fail("the lost reports are not reported:\n" + p.stdout)
        print("ok: lost background reports count 0 and are reported")


if __name__ == "__main__":
    main()
