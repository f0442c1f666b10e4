#!/usr/bin/python3
"""make_seeds.py DIR [BURSTC]: writes the seed corpora of the fuzz targets.

DIR/frontend, DIR/ir and DIR/pipeline get the examples and golden tests
(self-contained: imports inlined, so that a job reaches the planner), and one
seed per class of hostile input that the compiler must survive (issue 9):
tokens of more than 16 KB of every kind, 30,000-term operator chains, nesting
past every limit, overflowing shapes, special values, and hand-edited plans
whose communication disagrees with their rank sets. DIR/safetensors gets
weight files: good ones of every dtype, and one per class of hostile header
(lengths past the end and past the cap, 2 GiB, overlapping and out-of-range
offsets, unknown dtypes, overflowing shapes); DIR/npy gets .npy files of
versions 1-3 and every dtype the reader takes, and hostile headers; DIR/image
small JPEGs (grey, 4:2:0, 4:4:4, progressive) and PNGs (grey, RGB, RGBA,
palette, 16-bit) and truncated ones. With BURSTC (a built
burstc), the IR seeds include every example printed, planned and with
explicit communication.
"""
import glob
import os
import re
import subprocess
import sys

out = sys.argv[1]
burstc = sys.argv[2] if len(sys.argv) > 2 else None
top = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
for d in ("frontend", "ir", "pipeline", "safetensors", "npy", "image"):
    os.makedirs(os.path.join(out, d), exist_ok=True)


def seed(kind, name, text):
    with open(os.path.join(out, kind, name), "w") as f:
        f.write(text)


def inline(path, seen=None):
    """The file's text with its imports replaced by what they import (once)."""
    seen = set() if seen is None else seen
    real = os.path.realpath(path)
    if real in seen:
        return ""
    seen.add(real)
    text = open(path).read()
    return re.sub(r'^import "([^"]*)"', lambda m: inline(os.path.join(os.path.dirname(path), m.group(1)), seen),
                  text, flags=re.M)


for path in glob.glob(os.path.join(top, "examples", "*", "*.burst")):
    text = inline(path)
    name = os.path.basename(path)
    seed("frontend", name, text)
    seed("pipeline", name, text)
for path in glob.glob(os.path.join(top, "tests", "lit", "**", "*.burst"), recursive=True):
    seed("frontend", "lit_" + os.path.basename(path), open(path).read())
for path in glob.glob(os.path.join(top, "tests", "lit", "**", "*.ir"), recursive=True):
    text = open(path).read()
    seed("ir", "lit_" + os.path.basename(path), text)
    seed("pipeline", "lit_" + os.path.basename(path), ";\n" + text)

MODEL = "model m {\n  input x: f32[batch, 4]\n  h = %s\n}\n"
HW = ("gpu g { flops f32 = 1 TFLOPS, memory = 1 GiB, bandwidth = 1 GB/s }\n"
      "cluster c { gpu = g, gpus_per_node = 2, nvlink = 100 GB/s @ 1 us }\n")
JOB = "job j { model = m, cluster = c, batch = 8 }\n"
n = 17 * 1024
hostile = {
    "token_comment": "// " + "x" * n + "\n" + MODEL % "relu(x)",
    "token_block_comment": "/* " + "x" * n + " */\n" + MODEL % "relu(x)",
    "token_blanks": "let a =" + " " * n + "1\n" + MODEL % "relu(x)",
    "token_ident": "let " + "a" * n + " = 1\n" + MODEL % "relu(x)",
    "token_string": 'import "' + "s" * n + '"\n',
    "token_number": "let a = " + "9" * n + "\n",
    "token_unit": "let a = 1 " + "G" * n + "\n",
    "chain_plus": "let a = " + "+".join(["1"] * 30000) + "\n" + MODEL % "relu(x)",
    "chain_times": "let a = " + "*".join(["1"] * 30000) + "\n",
    "deep_parens": "let a = " + "1+(" * 300 + "1" + ")" * 300 + "\n",
    "deep_neg": "let a = " + "-" * 300 + "1\n",
    "deep_calls": MODEL % ("relu(" * 300 + "x" + ")" * 300),
    "deep_lists": "let a = " + "[" * 300 + "1" + "]" * 300 + "\n",
    "deep_loops": "model m {\n input x: f32[batch, 4]\n h = relu(x)\n" + "for i in 0..2 {\n" * 300 + "h = relu(h)\n" + "}\n" * 300 + "}\n",
    "deep_blocks": "block b() {\n" * 300 + "return relu(in)\n}\n" * 300,
    "overflow_input": MODEL.replace("4]", "2147483648, 2147483648, 2147483648]") % "flatten(x)",
    "overflow_conv": "model m {\n input x: f32[batch, 1048576, 1, 1]\n c = conv2d(x, channels = 1099511627776, kernel = 1)\n}\n",
    "overflow_window": "model m {\n input x: f32[batch, 1, 8, 8]\n c = conv2d(x, channels = 1, kernel = 1099511627776, dilation = 1099511627776)\n}\n",
    "overflow_reshape": MODEL % "reshape(x, shape = [1099511627776, 1099511627776])",
    "overflow_real": "let a = 1e308 * 10\n" + MODEL % "dropout(x, p = a)",
    "pool_stride_zero": MODEL.replace("4]", "3, 8, 8]") % "maxpool2d(x, kernel = 2, stride = 0)",
    "gpu_zero": "gpu g { flops f32 = 0 TFLOPS, memory = 0 GiB, bandwidth = 0 GB/s }\n",
    "batch_limits": HW + MODEL % "relu(x)" + "job j { model = m, cluster = c, batch = 2147483649, background = [m @ 4294967296] }\n",
    "blocks_only": "block b() {\n  return relu(in)\n}\n",
    # Blocks that multiply at each level (issue 31): counted, not expanded.
    "blocks_doubling": "block b0() { return relu(in) }\n" + "".join("block b%d() { h = b%d(in) return b%d(h) }\n" % (k, k - 1, k - 1) for k in range(1, 31)) + MODEL % "b30(x)",
    "blocks_tripling": "block t0() { return in }\n" + "".join("block t%d() { a = t%d(in) b = t%d(a) return t%d(b) }\n" % (k, k - 1, k - 1, k - 1) for k in range(1, 41)) + MODEL % "t40(x)",
    "blocks_mutual": "block a0(n) { return relu(in) }\nblock b0(n) { return relu(in) }\n" + "".join("block a%d(n) { h = in for i in 0..n { h = b%d(h, n = n) } return h }\nblock b%d(n) { h = a%d(in, n = n) return a%d(h, n = n + 1) }\n" % (k, k - 1, k, k - 1, k - 1) for k in range(1, 31)) + MODEL % "a30(x, n = 2)",
    "blocks_big_let": "block b() {\n  let l = [" + ", ".join(["1"] * 20000) + "]\n  return relu(in)\n}\nmodel m {\n  input x: f32[batch, 4]\n  h = x\n  for i in 0..20000 { h = b(h) }\n}\n",
    "job_small": HW + "model m {\n input x: f32[batch, 8]\n input y: i32[batch]\n h = linear(x, out = 4)\n l = cross_entropy(h, y)\n}\n" + JOB,
}
for name, text in hostile.items():
    seed("frontend", name + ".burst", text)
    seed("pipeline", name + ".burst", text)

PLAN = """graph mlp {
  %x = input : f32[N,8] @[0..3]
  %y = input : i32[N] @[0..1]
  %fc1 = linear %x {out = 4, bias = 1, tie = none} : f32[N,4] @[0..3]
  %fc1.grad = allreduce %fc1 {start = %fc1, complete = none} : f32[N,4] @[0..3]
  %relu = relu %fc1 : f32[N,4] @[0..3]
  %relu.to.fc2 = reshard %relu : f32[N,4] @[0..1]
  %fc2 = linear %relu.to.fc2 {out = 3, bias = 1, tie = none} : f32[N,3] @[0..1]
  %fc2.grad = allreduce %fc2 {start = %fc2, complete = none} : f32[N,3] @[0..1]
  %loss = cross_entropy %fc2, %y : f32[N] @[0..1]
}
gpu g {flops.f32 = 1e+12, bandwidth = 1e+11, memory = 1e+10}
cluster c {gpu = g, nodes = 1, gpus_per_node = 4, intra.bandwidth = 1e+10, intra.latency = 1e-06}
job j {model = mlp, cluster = c, batch = 8}
"""
plans = {
    "plan": PLAN,
    "plan_outside": PLAN.replace("allreduce %fc1 {start = %fc1, complete = none} : f32[N,4] @[0..3]", "allreduce %fc1 {start = %fc1, complete = none} : f32[N,4] @[0..2, 7]"),
    "plan_no_set": PLAN.replace("reshard %relu : f32[N,4] @[0..1]", "reshard %relu : f32[N,4]"),
    "plan_deleted": "\n".join(l for l in PLAN.split("\n") if "fc2.grad" not in l),
    "plan_ranges": PLAN.replace("@[0..3]", "@[0..999999]"),
    "empty": "; nothing\n",
}
for name, text in plans.items():
    seed("ir", name + ".ir", text)
    seed("pipeline", name + ".ir", ";\n" + text)



def safetensors(header, data=b"", length=None):
    """A safetensors image: the header's length (or `length`), the header, the data."""
    h = header.encode()
    n = len(h) if length is None else length
    return n.to_bytes(8, "little") + h + data


def st_tensor(name, dtype, shape, begin, end):
    return '"%s":{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}' % (
        name, dtype, ",".join(map(str, shape)), begin, end)


st = {
    "metadata": safetensors('{"__metadata__":{"format":"pt"},' + st_tensor("w", "F32", [1], 0, 4) + "}",
                            b"\0\0\x80?"),
    "scalar_and_empty": safetensors("{" + st_tensor("n", "I64", [], 0, 8) + "," +
                                    st_tensor("e", "F32", [0, 4], 8, 8) + "}", b"\x03" + b"\0" * 7),
    "past_end": safetensors("{}", length=1000),
    "header_2gib": safetensors("{}", length=2 << 30),
    "header_max": safetensors("{}", length=(1 << 64) - 1),
    "overlap": safetensors("{" + st_tensor("a", "F32", [2], 0, 8) + "," + st_tensor("b", "F32", [2], 4, 12) + "}",
                           b"\0" * 12),
    "out_of_range": safetensors("{" + st_tensor("a", "F32", [2], 0, 800) + "}", b"\0" * 8),
    "unknown_dtype": safetensors("{" + st_tensor("a", "F8_E5M2", [2], 0, 2) + "}", b"\0" * 2),
    "overflow": safetensors("{" + st_tensor("a", "F64", [4611686018427387904, 4], 0, 0) + "}"),
    "escapes": safetensors('{"w\\u00e9\\ud83d\\ude00":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x07"),
}
# A good file of every dtype the burstc programs read or write, and more.
dts = [("F32", 4), ("F16", 2), ("BF16", 2), ("I64", 8), ("F64", 8), ("U8", 1), ("I32", 4), ("BOOL", 1)]
st["all_dtypes"] = safetensors("{" + ",".join(
    st_tensor("t%d" % k, dt, [2], sum(2 * s for _, s in dts[:k]), sum(2 * s for _, s in dts[:k + 1]))
    for k, (dt, _) in enumerate(dts)) + "}", b"\x01" * sum(2 * s for _, s in dts))
for name, data in st.items():
    with open(os.path.join(out, "safetensors", name + ".safetensors"), "wb") as f:
        f.write(data)



def npy(dict_text, data=b"", major=1, length=None):
    """A .npy image: magic, version, the dict's length (or `length`), the dict, the data."""
    h = dict_text.encode()
    pre = 10 if major == 1 else 12
    h += b" " * ((-(pre + len(h) + 1)) % 64) + b"\n"
    n = len(h) if length is None else length
    return b"\x93NUMPY" + bytes([major, 0]) + n.to_bytes(2 if major == 1 else 4, "little") + h + data


def npy_dict(descr, shape, fortran="False"):
    return "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
        descr, fortran, "".join("%d," % d for d in shape))


ny = {
    "u8_v1": npy(npy_dict("|u1", [2, 3]), bytes(range(6))),
    "i64_v2": npy(npy_dict("<i8", [2]), b"\1" + b"\0" * 15, major=2),
    "f16_v3": npy(npy_dict("<f2", [1, 2]), b"\0\x3c\0\xc0", major=3),
    "bf16": npy(npy_dict("<V2", [2]), b"\x80\x3f\0\0"),
    "f32_scalar": npy(npy_dict("<f4", []), b"\0\0\x80\x3f"),
    "u2_i4": npy(npy_dict("<u2", [2, 1]), b"\1\0\2\0"),
    "i4_long": npy("{'descr': '<i4', 'fortran_order': False, 'shape': (1L, 1L), }", b"\0" * 4),
    "empty": npy(npy_dict("<f4", [0, 5])),
    "past_end": npy(npy_dict("<f4", [2]), length=1000),
    "header_max": npy(npy_dict("<f4", [2]), major=2, length=(1 << 32) - 1),
    "overflow": npy(npy_dict("<f4", [4611686018427387904, 4])),
    "big_endian": npy(npy_dict(">f4", [1]), b"\0" * 4),
    "fortran": npy(npy_dict("<f4", [2, 2], "True"), b"\0" * 16),
    "truncated": npy(npy_dict("<f4", [100]), b"\0" * 10),
    "structured": npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", b"\0" * 4),
}
for name, data in ny.items():
    with open(os.path.join(out, "npy", name + ".npy"), "wb") as f:
        f.write(data)

try:
    import io
    from PIL import Image
    img = Image.new("RGB", (13, 9))
    img.putdata([(x * 19 % 256, y * 28 % 256, (x * y) % 256) for y in range(9) for x in range(13)])
    variants = {
        "grey.jpg": (img.convert("L"), dict(format="JPEG")),
        "420.jpg": (img, dict(format="JPEG", quality=80)),
        "444.jpg": (img, dict(format="JPEG", subsampling=0)),
        "progressive.jpg": (img, dict(format="JPEG", progressive=True)),
        "grey.png": (img.convert("L"), dict(format="PNG")),
        "rgb.png": (img, dict(format="PNG")),
        "rgba.png": (img.convert("RGBA"), dict(format="PNG")),
        "palette.png": (img.convert("P"), dict(format="PNG")),
        "i16.png": (img.convert("L").convert("I").point(lambda v: v * 257), dict(format="PNG")),
    }
    for name, (im, kw) in variants.items():
        b = io.BytesIO()
        im.save(b, **kw)
        data = b.getvalue()
        for tag, part in (("", data), ("truncated-", data[:len(data) * 2 // 3])):
            with open(os.path.join(out, "image", tag + name), "wb") as f:
                f.write(part)
except ImportError:  # Pillow (python3-pil) makes the image seeds
    pass

if burstc:
    for path in glob.glob(os.path.join(top, "examples", "*", "*.burst")):
        name = os.path.basename(path)[:-len(".burst")]
        for stop in ("lower", "plan", "comm"):
            r = subprocess.run([burstc, "--stop-after=" + stop, path], capture_output=True, text=True)
            if r.returncode == 0 and r.stdout:
                seed("ir", "%s.%s.ir" % (name, stop), r.stdout)
                if stop != "lower":
                    seed("pipeline", "%s.%s.ir" % (name, stop), r.stdout)
