"""Prints what json_trace.test checks about burstc sim's --json and --trace files."""
import json
import re
import sys

run = json.load(open(sys.argv[1]))
trace = json.load(open(sys.argv[2]))
table = open(sys.argv[3]).read()
print("job", run["job"], "model", run["model"], "strategy", run["strategy"], "gpus", run["gpus"],
      "batch", run["batch"], "iterations", run["iterations"])
mean_ms = float(re.search(r"^simulated\s+([0-9.]+)", table, re.M).group(1))
print("iterations listed %d, mean matches the table: %s" %
      (len(run["iteration_s"]), abs(run["mean_s"] * 1e3 - mean_ms) < 1e-3))
print("samples/s: fg*total = %g" % round(run["fg_samples_per_s"] * run["total_s"], 6))
busy = run["gpu_busy"]["fg"]
print("per-GPU busy: %d values, in [0, 1]: %s" % (len(busy), all(0 <= b <= 1 for b in busy)))
other = trace["otherData"]
print("trace: gpus", other["gpus"], "shown", other["gpus_shown"])
ev = trace["traceEvents"]
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
print("trace: tracks GPU 0", ", ".join(names[(0, t)] for t in range(3)))
spans = [e for e in ev if e.get("ph") == "X"]
print("trace: every event has ts and dur >= 0:", all(e["ts"] >= 0 and e["dur"] >= 0 for e in spans))
k0 = [e["name"] for e in sorted(spans, key=lambda e: e["ts"]) if e["pid"] == 0 and e["tid"] == 0]
print("trace: kernels of GPU 0:", ", ".join(k0[:3]))
links = sorted({names[(e["pid"], e["tid"])] for e in spans if e["cat"] == "link" and "GPU 0 " in names.get((e["pid"], e["tid"]), "")})
print("trace: link tracks:", ", ".join(links))
