"""Prints what background.test checks about the candidates of a job with
background jobs in burstc tune's --json: every plan whose placement holds
copies is there packed and unpacked (when the list has room for both), no
(plan, packing) twice, the predictions add up, and what the runs measured."""
import json
import sys

run = json.load(open(sys.argv[1]))
cands = run["candidates"]
full = len(cands) == run["distinct_plans"]
key = lambda c: (tuple(c["gpus_per_layer"]), tuple(c["first_rank_per_layer"]))
print("metric", run["metric"], "background", run["background"], "candidates", len(cands),
      "all distinct kept:", full)
print("no plan twice per packing:",
      len({(key(c), c["packed"]) for c in cands}) == len(cands),
      "names unique:", len({c["name"] for c in cands}) == len(cands))
packed = [c for c in cands if c["packed"]]
plain = [c for c in cands if not c["packed"]]
twins = [p for p in packed if any(key(u) == key(p) and u["name"] + " +bg" == p["name"]
                                  for u in plain)]
print("packed", len(packed) > 0, "with copies:", all(p["copies"] > 0 for p in packed),
      "named +bg:", all(p["name"].endswith(" +bg") for p in packed))
print("twins", len(twins), "of", len(packed), "packed; every packed has its unpacked twin:",
      len(twins) == len(packed))
print("unpacked predict no background:", all(u["predicted_bg_samples_per_s"] == 0 for u in plain),
      "packed some:", all(p["predicted_bg_samples_per_s"] > 0 for p in packed))
add = lambda c: c["predicted_fg_samples_per_s"] + (c["predicted_bg_samples_per_s"]
                                                   if run["metric"] == "cluster" else 0)
print("predicted metric adds up:",
      all(abs(c["predicted_metric"] - add(c)) <= 1e-9 * add(c) for c in cands))
ran = [c for c in cands if c["runs"] > 0]
print("measured background: packed", all(c["mean_bg"] > 0 for c in ran if c["packed"]),
      "unpacked none", all(c["mean_bg"] == 0 for c in ran if not c["packed"]))
print("mean metric adds up:",
      all(abs(c["mean_metric"] - c["mean_fg"] - (c["mean_bg"] if run["metric"] == "cluster"
                                                  else 0)) <= 1e-9 * c["mean_metric"]
          for c in ran))
