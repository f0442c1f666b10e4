"""Prints what sim.test checks about burstc tune's table, --json and --comparisons files:
the numbers must agree with each other (comparisons, wins, runs, the ranking)."""
import json
import re
import sys

run = json.load(open(sys.argv[1]))
table = open(sys.argv[2]).read()
lines = [l for l in open(sys.argv[3]) if l.strip() and not l.startswith("#")]
cands = run["candidates"]
print("runner", run["runner"], "method", run["method"], "gpus", run["gpus"], "batch", run["batch"])
print("comparisons", run["comparisons"], "trials", len(run["trials"]), "lines", len(lines),
      "wins", sum(c["wins"] for c in cands), "losses", sum(c["losses"] for c in cands))
print("runs = 2 x comparisons:", run["runs"] == 2 * run["comparisons"])
made = int(re.search(r"made (\d+) in", table).group(1))
print("table says", made)
print("ranks in order:", [c["rank"] for c in cands] == list(range(1, len(cands) + 1)))
scores = [c["score"] for c in cands]
print("scores sum to 1:", abs(sum(scores) - 1) < 1e-9, "descending:", scores == sorted(scores, reverse=True))
print("winner is rank 1:", run["winner"] == cands[0]["name"])
print("bound:", abs(run["target_comparisons"] - run["c"] * len(cands) *
                    __import__("math").log(len(cands)) / run["delta_estimated"] ** 2) < 1e-6 * run["target_comparisons"])
print("separated", run["separated"], "and reached:", run["comparisons"] >= run["target_comparisons"])
names = {c["name"] for c in cands}
print("comparison lines name candidates:", all(l.strip().split(",")[0] in names for l in lines))
