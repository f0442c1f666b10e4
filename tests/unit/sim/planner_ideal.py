#!/usr/bin/python3
"""The planner's reported time is what its schedule achieves: for every job given
(examples/jobs and tests/bench/sim/jobs) and every strategy, `burstc sim --ideal`
plays the plan's timeline and its planner line (the time `burstc plan` reports,
plan_solve's) must equal the simulated and the timeline time to 1e-9 relative.
Also the study's own setting of Inception-v3 (8 GPUs, DeepPool's profile), whose
branches run side by side. A strategy that has no plan for a job (deeppool on
some graphs) is skipped and counted.

usage: planner_ideal.py --burstc BURSTC [--profile-dir DIR] JOB.burst...
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def sim(burstc, job, strategy, extra, out):
    cmd = [burstc, "sim", "--ideal", "--iterations", "1", "--background", "off", "--strategy",
           strategy, "--json", out] + extra + [job]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode == 1:
        return None, p.stderr.strip().splitlines()[-1:] or [""]
    if p.returncode != 0:
        raise SystemExit("%s: exit %d\n%s" % (" ".join(cmd), p.returncode, p.stderr))
    with open(out) as f:
        return json.load(f), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--profile-dir")
    ap.add_argument("jobs", nargs="+")
    a = ap.parse_args()
    runs = [(j, []) for j in a.jobs]
    if a.profile_dir:
        for j in a.jobs:
            if os.path.basename(j) == "study_inception.burst":
                runs.append((j, ["--gpus", "8", "--profile",
                                 os.path.join(a.profile_dir, "inceptionLayerGpuProfileA100V2.txt")]))
    bad, checked, skipped = 0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "sim.json")
        for job, extra in runs:
            for s in ("dp", "deeppool", "pow2", "burst"):
                r, why = sim(a.burstc, job, s, extra, out)
                name = "%s %s %s" % (os.path.basename(job), " ".join(extra), s)
                if r is None:
                    skipped += 1
                    print("skipped %s: %s" % (name, why[0]))
                    continue
                checked += 1
                planner, timeline, mean = r["planner_s"], r["timeline_s"], r["mean_s"]
                ok = all(abs(x - planner) <= 1e-9 * planner for x in (timeline, mean))
                print("%-8s %s: planner %.9g s, timeline %.9g s, simulated (ideal) %.9g s" %
                      ("ok" if ok else "MISMATCH", name, planner, timeline, mean))
                bad += not ok
    print("%d plans checked, %d without a plan, %d mismatches" % (checked, skipped, bad))
    if checked == 0 or bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
