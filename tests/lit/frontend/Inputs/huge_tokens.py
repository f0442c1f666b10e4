"""Writes ok.burst and bad.burst with tokens of n bytes into a folder (huge_tokens.test)."""
import os
import sys

n, out = int(sys.argv[1]), sys.argv[2]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "ok.burst"), "w") as f:
    f.write("// " + "c" * n + "\n")
    f.write("/* " + "b" * n + " */\n")
    f.write("let seven =" + " " * n + "7" + "\t" * n + "\n")
    f.write("let one = " + "0" * n + "1\n")
    f.write("let r = 1." + "0" * n + "\n")
    name = "m" + "x" * n
    f.write("model %s {\n  input x: f32[batch, seven * one]\n  h = relu(x)\n}\n" % name)
    f.write("gpu g { flops f32 = 1 TFLOPS, memory = 1 GiB, bandwidth = 1 GB/s }\n")
    f.write("cluster c { gpu = g, gpus_per_node = 1 }\n")
    f.write('job j { model = %s, cluster = c, batch = 8, data = "%s" }\n' % (name, "d" * n))
with open(os.path.join(out, "bad.burst"), "w") as f:
    f.write("let a = " + "1" * n + "\n")
    f.write("let b = 1 GiB" + "B" * n + "\n")
