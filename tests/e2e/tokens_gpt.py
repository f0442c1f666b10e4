#!/usr/bin/python3
"""End-to-end: a tiny GPT on byte tokens (--data tokens:FILE).

    tokens_gpt.py --burstc BURSTC --job tests/e2e/tiny_gpt_tokens.burst [--np 4]

The licence texts every Debian system ships (/usr/share/common-licenses) are written
as uint16 byte tokens (what nanoGPT's prepare scripts write): the first 90% to
train.bin, the rest to val.bin. 150 steps of the job's plan must bring the loss from
about ln(256) = 5.55 to below 3.3 (the text is learnable; synthetic tokens stay at
ln(256)), and --eval-data tokens:val.bin prints a test accuracy (the fraction of
correct tokens) above chance. A token
file with an id of 300 fails before training, naming the file.
"""
import argparse
import glob
import math
import os
import re
import subprocess
import tempfile

import numpy as np

from data_common import fail, mpirun


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burstc", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--np", type=int, default=4)
    a = ap.parse_args()
    text = b"".join(open(p, "rb").read() for p in sorted(glob.glob("/usr/share/common-licenses/*"))
                    if os.path.isfile(p))
    tokens = np.frombuffer(text, np.uint8).astype(np.uint16)
    cut = len(tokens) * 9 // 10
    with tempfile.TemporaryDirectory() as tmp:
        train, val = os.path.join(tmp, "train.bin"), os.path.join(tmp, "val.bin")
        tokens[:cut].tofile(train)
        tokens[cut:].tofile(val)
        prog = os.path.join(tmp, "prog")
        r = subprocess.run([a.burstc, "build", a.job, "-o", prog], capture_output=True, text=True)
        if r.returncode:
            fail("burstc build failed:\n" + r.stderr)
        out = mpirun(a.np, prog, ["--data", "tokens:" + train, "--eval-data", "tokens:" + val]).stdout
        ls = [float(m.group(1)) for m in re.finditer(r"^step \d+ loss (\S+)$", out, re.M)]
        acc = re.search(r"^test accuracy (\S+)", out, re.M)
        if len(ls) != 150 or abs(ls[0] - math.log(256)) > 0.5 or np.mean(ls[-10:]) > 3.3:
            fail("loss %s -> %s over %d steps, expected from about ln(256) to below 3.3"
                 % (ls[:1], ls[-10:], len(ls)))
        per_token = acc and float(acc.group(1))
        if not acc or not 0.1 < per_token <= 1:
            fail("test accuracy %s per token, expected a fraction above 0.1 (chance: 1/256)" % per_token)
        print("%d bytes of licences: loss %.3f -> %.3f (ln 256 = %.3f), test accuracy %.3f per token"
              % (len(tokens), ls[0], np.mean(ls[-10:]), math.log(256), per_token))
        bad = os.path.join(tmp, "bad.bin")
        t = tokens[:1000].copy()
        t[500] = 300
        t.tofile(bad)
        r = mpirun(a.np, prog, ["--iterations", "2", "--data", "tokens:" + bad], check=False)
        if r.returncode == 0 or bad not in r.stderr or "token 300 at position 500" not in r.stderr:
            fail("an id of 300 should fail naming the file, got %d:\n%s" % (r.returncode, r.stderr))
        print("bad token: " + next(l for l in r.stderr.splitlines() if bad in l))


if __name__ == "__main__":
    main()
