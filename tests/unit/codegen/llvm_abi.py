#!/usr/bin/env python3
"""The LLVM writer's declarations of libburstrt's functions against the C
header, as clang reads it.

llvm_emit.c spells every runtime function's prototype once more (rt_sigs):
LLVM sees no header. A wrong integer width or a bool without zeroext would
compile, link and silently pass garbage. This test collects the
declarations of the modules burstc writes for the example jobs (every op of
the examples, the driver's calls) and compares each with clang's
declaration of the same function from runtime/burstrt.h: the same result
and parameter types, pointers taken as one kind, and the same
zeroext/signext attributes. The structs the program reads or builds
(rt_tensor, rt_param, rt_options, rt_sgd, rt_adam, and rt_bg_model for the
example jobs with background copies) must have clang's layout.
"""
import argparse
import re
import subprocess
import sys
import tempfile
import os

TYPE = re.compile(r"^%(?:struct\.)?(rt_\w+) = type (.*)$", re.M)
DECL = re.compile(r"^declare (?:dso_local )?(.*?) @(\w+)\((.*)\)(?: local_unnamed_addr)?(?: #\d+)?$", re.M)


def norm_type(t):
    t = re.sub(r"\b(noundef|nonnull|readonly|writeonly|nocapture|dereferenceable(?:_or_null)?\(\d+\)|align \d+)\b", "", t)
    t = re.sub(r"(%[\w.]+|\w+)\*+", "ptr", t)  # every pointer is one kind
    t = re.sub(r"\w+ \((?:ptr(?:, )?|\w+(?:, )?)*\)\*", "ptr", t)  # function pointers too
    t = re.sub(r"%[\w.]+", "", t)  # parameter names
    return " ".join(t.split())


def split_params(s):
    return [norm_type(p) for p in s.split(",")] if s.strip() else []


def declarations(text):
    return {m.group(2): (norm_type(m.group(1)), split_params(m.group(3))) for m in DECL.finditer(text)}


def types(text):
    return {m.group(1): norm_type(m.group(2)) for m in TYPE.finditer(text)}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--clang", required=True)
    ap.add_argument("--runtime", required=True, help="the folder of burstrt.h")
    ap.add_argument("--min", type=int, default=40, help="fail unless at least this many are compared")
    ap.add_argument("jobs", nargs="+")
    a = ap.parse_args()
    ours, our_types = {}, {}
    for job in a.jobs:
        p = subprocess.run([a.burstc, "build", "-O0", "--emit=llvm", job, "-o", "-"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("burstc failed on %s:\n%s" % (job, p.stderr))
        ours.update(declarations(p.stdout))
        our_types.update(types(p.stdout))
    names = sorted(n for n in ours if n.startswith("rt_"))
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "refs.c")
        with open(src, "w") as f:
            f.write('#include "burstrt.h"\nvoid *burstc_refs[] = {\n')
            f.writelines("    (void *)&%s,\n" % n for n in names)
            f.write("};\n")
            f.writelines("%s burstc_type_%d;\n" % (t, k) for k, t in enumerate(sorted(our_types)))
        p = subprocess.run([a.clang, "-S", "-emit-llvm", "-O0", "-std=c17", "-I", a.runtime, src, "-o", "-"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("clang failed on the runtime's header:\n" + p.stderr)
    theirs = declarations(p.stdout)
    bad = 0
    for n in names:
        if n not in theirs:
            print("%s: declared by burstc, not by clang from burstrt.h" % n)
            bad += 1
        elif ours[n] != theirs[n]:
            print("%s: burstc declares %s(%s), burstrt.h says %s(%s)"
                  % (n, ours[n][0], ", ".join(ours[n][1]), theirs[n][0], ", ".join(theirs[n][1])))
            bad += 1
    their_types = types(p.stdout)
    for t in sorted(our_types):
        if our_types[t] != their_types.get(t):
            print("struct %s: burstc lays it out as %s, burstrt.h as %s" % (t, our_types[t], their_types.get(t)))
            bad += 1
    if bad:
        sys.exit("%d of %d runtime declarations and structs differ from burstrt.h"
                 % (bad, len(names) + len(our_types)))
    if len(our_types) < 6:
        sys.exit("only the structs %s were compared (expected rt_tensor, rt_param, rt_options,"
                 " rt_sgd, rt_adam, rt_bg_model)" % sorted(our_types))
    if len(names) < a.min:
        sys.exit("only %d runtime functions compared (expected at least %d)" % (len(names), a.min))
    print("%d runtime declarations and %d structs (%s) match burstrt.h"
          % (len(names), len(our_types), ", ".join(sorted(our_types))))


if __name__ == "__main__":
    main()
