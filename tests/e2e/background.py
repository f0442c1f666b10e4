#!/usr/bin/env python3
"""End-to-end check of GPU multiplexing on the CPU backend (issue 12).

The burst plan of the Fashion-MNIST job (tests/e2e/fmnist_background.burst:
examples/jobs/fmnist_cpu.burst with a background MLP) is trained on 4 ranks
with background copies on ranks 0, 1 and 3 (none on 2), with --background on
and off. It requires:
  (a) the foreground's losses (every digit printed) and its final parameters
      and optimizer state (the checkpoint files, byte for byte) are the same
      with background work on and off, and so are every rank's all-reduces
      during the training (counted through MPI's profiling interface): the
      modes differ in the background work alone;
  (b) every background copy's losses equal a standalone one-rank run of the
      background model (tests/e2e/bg_mlp_alone.burst) with the copy's seed for
      the number of steps the copy completed;
  (c) every rank that hosts a copy completed steps of it, the rank without one
      ran none, the exit report counts them, and the trace shows the slices
      on background tracks;
  (d) the checkpoint holds each copy's state: a --resume run continues every
      copy at the step after its last completed one, and (b) holds for the
      steps of both runs together;
  (e) the program built by the LLVM code generator (the default) and the one
      built through C (--codegen=c) agree: the same foreground losses (every
      digit) and checkpoint files (byte for byte), copies that make progress
      on the same ranks, and each copy's losses equal over the steps both
      completed (how many a copy completes depends on timing) and equal to
      the one-rank run.

The interleave section is written here (a fixture: ranks, seeds and cuts of
three shapes), so the test does not depend on where the interleave pass puts
copies; with --use-pass it takes the pass's section instead.
"""
import argparse
import filecmp
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

HAND = """
interleave fmnist_background {
  slice_bound = 0.0005, fg_time = 0.004, fg_time_bg = 0.0042
  copy 0 @ 0 {seed = 101, steps_per_iter = 0.5, cut = [0, 4, 9, 15]}
  copy 0 @ 1 {seed = 102, steps_per_iter = 0.5, cut = [0, 15]}
  copy 0 @ 3 {seed = 104, steps_per_iter = 0.5, cut = [0, 7, 15]}
}
"""


def fail(msg):
    sys.stderr.write("FAIL: " + msg + "\n")
    sys.exit(1)


def run(cmd, timeout=900):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        fail("command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
    return p.stdout


# Counts each rank's non-blocking all-reduces (the training's collectives: the loss sum,
# the gradients; rt_bg_finish's come after the training, and block) through MPI's
# profiling interface, and prints them at MPI_Finalize.
COUNT_COLLECTIVES = r"""
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
static long calls, elements;
int MPI_Iallreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c,
                   MPI_Request *q)
{
    calls++;
    elements += n;
    return PMPI_Iallreduce(s, r, n, t, o, c, q);
}
int MPI_Finalize(void)
{
    int rank;
    char line[128];
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int len = snprintf(line, sizeof line, "collectives rank %d: %ld all-reduces, %ld elements\n",
                       rank, calls, elements);
    fflush(stdout);
    ssize_t w = write(1, line, (size_t)len);
    (void)w;
    return PMPI_Finalize();
}
"""


def collectives(out):
    return re.findall(r"^collectives rank (\d+): (\d+) all-reduces, (\d+) elements$", out, re.M)


def mpirun(np, prog, args, preload=None):
    """The ranks' standard outputs, rank 0's first. Each is read from its own file
    (--output-filename): where 4 ranks write thousands of lines, mpirun's merged output
    splits and mixes them on a loaded machine (735 of 80,400 lines of a plain MPI
    program here), and a lost background loss line reads as a wrong step."""
    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                      OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1")
    with tempfile.TemporaryDirectory() as d:
        pre = ["-x", "LD_PRELOAD=" + preload] if preload else []
        if preload and "ASAN_OPTIONS" in os.environ:
            # An ASan build wants its runtime first among the libraries; the shim wraps
            # only MPI's collectives, so the check of that order is turned off for it.
            pre += ["-x", "ASAN_OPTIONS=%s:verify_asan_link_order=0" % os.environ["ASAN_OPTIONS"]]
        run(["mpirun", "-np", str(np), "--oversubscribe", "--output-filename", d] + pre + [prog] +
            args)
        outs = []
        for r in range(np):
            found = glob.glob(os.path.join(d, "*", "rank.%d" % r, "stdout"))
            if len(found) != 1:
                fail("mpirun --output-filename left %d stdout files of rank %d" % (len(found), r))
            with open(found[0]) as f:
                outs.append(f.read())
    return "".join(outs)


def fg_losses(out):
    return re.findall(r"^step (\d+) loss (\S+)$", out, re.M)


def bg_losses(out):
    per = {}
    for m in re.finditer(r"^bg (\S+) rank (\d+) step (\d+) loss (\S+)$", out, re.M):
        per.setdefault(int(m.group(2)), []).append((int(m.group(3)), m.group(4)))
    return per


def copies_of(ir):
    return [(int(m.group(1)), int(m.group(2))) for m in
            re.finditer(r"^\s*copy 0 @ (\d+) \{[^}]*seed = (\d+)", ir, re.M)]


def same_tree(a, b):
    """Every foreground file under a and b, byte for byte; returns how many were compared."""
    n = 0
    for root, _, files in os.walk(a):
        for f in files:
            if ".bg-" in f:
                continue
            pa = os.path.join(root, f)
            pb = os.path.join(b, os.path.relpath(pa, a))
            if not os.path.exists(pb) or not filecmp.cmp(pa, pb, shallow=False):
                fail("the checkpoint file %s differs between --background on and off" %
                     os.path.relpath(pa, a))
            n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--source", required=True, help="the tests/e2e folder")
    # The guard's first probe runs no background work: a warm-up, 2 settling steps and a
    # baseline window of 8 that slides on by up to 8 steps while after-effects of the
    # start fade (runtime/guard.c, GUARD_SLIDE), in a resumed run too. That is 19 steps
    # at most (11 on a quiet machine): 24 leave at least 5 with background work.
    ap.add_argument("--iterations", type=int, default=24)
    ap.add_argument("--use-pass", action="store_true")
    a = ap.parse_args()
    job = os.path.join(a.source, "fmnist_background.burst")
    alone_job = os.path.join(a.source, "bg_mlp_alone.burst")

    with tempfile.TemporaryDirectory() as tmp:
        planned = run([a.burstc, "--strategy", "burst", job])
        if not a.use_pass:
            planned = re.sub(r"\ninterleave fmnist_background \{.*?\n\}\n", "\n", planned,
                             flags=re.S) + HAND
        copies = copies_of(planned)
        if not copies:
            fail("the plan places no background copy")
        ir = os.path.join(tmp, "plan.ir")
        with open(ir, "w") as f:
            f.write(planned)
        prog, alone = os.path.join(tmp, "prog"), os.path.join(tmp, "alone")
        progc = os.path.join(tmp, "prog_c")
        run([a.burstc, "build", "--codegen=llvm", ir, "-o", prog])
        run([a.burstc, "build", "--codegen=c", ir, "-o", progc])
        run([a.burstc, "build", alone_job, "-o", alone])

        shim = os.path.join(tmp, "count_collectives.so")
        with open(shim + ".c", "w") as f:
            f.write(COUNT_COLLECTIVES)
        run(["mpicc", "-shared", "-fPIC", "-O2", shim + ".c", "-o", shim])

        common = ["--iterations", str(a.iterations), "--threads", "1", "--data", "fmnist",
                  "--slowdown", "100"]
        trace = os.path.join(tmp, "trace.json")
        on = mpirun(4, prog, common + ["--checkpoint-dir", os.path.join(tmp, "on"),
                                       "--trace", trace], preload=shim)
        off = mpirun(4, prog, common + ["--background", "off",
                                        "--checkpoint-dir", os.path.join(tmp, "off")],
                     preload=shim)

        # (a) the two modes differ in the background work alone: every rank makes the
        # same all-reduces, of the same sizes (the guard's numbers ride on the loss sum).
        con, coff = collectives(on), collectives(off)
        if len(con) != 4 or con != coff:
            fail("the ranks' all-reduces differ with background on and off:\non:  %s\noff: %s" %
                 (con, coff))

        # (a) the foreground does not see the background.
        lon, loff = fg_losses(on), fg_losses(off)
        if len(lon) != a.iterations or lon != loff:
            fail("foreground losses differ with background on and off:\non:  %s\noff: %s" %
                 (lon, loff))
        if same_tree(os.path.join(tmp, "on"), os.path.join(tmp, "off")) < 4:
            fail("expected a checkpoint file per rank")
        if bg_losses(off):
            fail("--background off ran background steps")
        if "background off" not in off:
            fail("--background off does not say so at exit")

        # (c) progress where the plan put copies, none elsewhere.
        per = bg_losses(on)
        hosts = {r for r, _ in copies}
        for r in per:
            if r not in hosts:
                fail("rank %d has no copy but ran %d background steps" % (r, len(per[r])))
        total = 0
        for r, _ in copies:
            steps = per.get(r, [])
            if not steps:
                fail("the copy on rank %d made no progress" % r)
            if [s for s, _ in steps] != list(range(len(steps))):
                fail("rank %d's background steps are not 0, 1, 2, ...: %s" % (r, steps[:10]))
            total += len(steps)
        m = re.search(r"^background bg_mlp: (\d+) copies, (\d+) steps, (\S+) samples/s$", on, re.M)
        if not m or int(m.group(1)) != len(copies) or int(m.group(2)) != total:
            fail("the exit report does not count %d copies and %d steps:\n%s" %
                 (len(copies), total, on[-600:]))
        if not re.search(r"^foreground slowdown \d", on, re.M):
            fail("no measured foreground slowdown at exit")
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
        tracks = {(e["pid"], e["tid"]) for e in events
                  if e.get("ph") == "X" and e["name"].startswith("bg bg_mlp slice")}
        if {p for p, t in tracks} != hosts or any(t == 0 for _, t in tracks):
            fail("background slices are not on their own tracks of the hosting ranks: %s" %
                 sorted(tracks))

        # (e) the C-built program: the same foreground, copies on the same ranks.
        onc = mpirun(4, progc, common + ["--checkpoint-dir", os.path.join(tmp, "on_c")])
        if fg_losses(onc) != lon:
            fail("the LLVM-built and C-built programs' foreground losses differ:\nllvm: %s\nc:    %s"
                 % (lon, fg_losses(onc)))
        if same_tree(os.path.join(tmp, "on"), os.path.join(tmp, "on_c")) < 4:
            fail("expected a checkpoint file per rank")
        perc = bg_losses(onc)
        common = {}
        if set(perc) != set(per):
            fail("the LLVM-built program's copies ran on ranks %s, the C-built one's on %s" %
                 (sorted(per), sorted(perc)))
        for r in per:
            both = common[r] = min(len(per[r]), len(perc[r]))
            if per[r][:both] != perc[r][:both]:
                fail("rank %d's copy: the LLVM-built and C-built programs' background losses "
                     "differ:\nllvm: %s\nc:    %s" % (r, per[r][:both], perc[r][:both]))
        mc = re.search(r"^background bg_mlp: (\d+) copies, (\d+) steps, ", onc, re.M)
        if not mc or int(mc.group(1)) != len(copies) or \
                int(mc.group(2)) != sum(len(v) for v in perc.values()):
            fail("the C-built program's exit report does not count its copies and steps:\n%s" %
                 onc[-600:])

        # (d) the copies' state is in the checkpoint: a resumed run continues them.
        bgfiles = [f for _, _, fs in os.walk(os.path.join(tmp, "on")) for f in fs if ".bg-" in f]
        if len(bgfiles) != len(copies):
            fail("expected one background checkpoint file per copy, found %s" % bgfiles)
        more = mpirun(4, prog, ["--iterations", str(a.iterations + 24), "--threads", "1", "--data",
                                "fmnist", "--slowdown", "100", "--resume", "--checkpoint-dir",
                                os.path.join(tmp, "on")])
        after = bg_losses(more)
        for r, _ in copies:
            if not after.get(r) or after[r][0][0] != len(per[r]):
                fail("rank %d's copy did not resume at step %d: %s" %
                     (r, len(per[r]), after.get(r, [])[:3]))
            per[r] = per[r] + after[r]

        # (b) each copy trained what a one-rank run of its model trains (and so did
        # the C-built program's copies, over their steps).
        for r, seed in copies:
            steps = per[r]
            n = max(len(steps), len(perc[r]))
            ref = fg_losses(mpirun(1, alone, ["--iterations", str(n), "--seed",
                                              str(seed), "--threads", "1", "--data", "fmnist"]))
            got = [(str(s), l) for s, l in steps]
            if [(str(s), l) for s, l in perc[r]] != ref[:len(perc[r])]:
                fail("the C-built program's copy on rank %d differs from its one-rank run" % r)
            ref = ref[:len(steps)]
            if got != ref:
                bad = next(i for i in range(min(len(got), len(ref))) if got[i] != ref[i]) \
                    if len(got) == len(ref) else -1
                fail("copy on rank %d (seed %d): %d steps, first difference at %d: %s vs %s" %
                     (r, seed, len(steps), bad, got[bad] if bad >= 0 else len(got),
                      ref[bad] if bad >= 0 else len(ref)))
        print("ok: foreground identical over %d steps; copies on ranks %s made %s steps (with a "
              "resumed run), each equal to its one-rank run; the LLVM-built and C-built programs "
              "agree (foreground losses and checkpoints, background losses over the %s steps "
              "both ran)" %
              (a.iterations, sorted(hosts), [len(per[r]) for r, _ in copies],
               [common[r] for r, _ in copies]))


if __name__ == "__main__":
    main()
