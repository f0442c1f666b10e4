"""Writes the inputs of long_expressions.test into a folder."""
import os
import sys

out = sys.argv[1]


def write(name, text):
    path = os.path.join(out, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


MODEL = "model m {\n  input x: f32[batch, 4]\n  h = %s\n}\n"
write("chains.burst",
      "let sum = " + " + ".join(["1"] * 40000) + "\n"
      "let prod = " + " * ".join(["1"] * 100000) + "\n"
      "let diff = 100003 - " + " - ".join(["1"] * 100000) + "\n"
      "model m {\n  input x: f32[batch, sum, prod, diff]\n}\n")
write("deep_ok.burst", MODEL % ("relu(" * 256 + "x" + ")" * 256))
write("deep_calls.burst", MODEL % ("relu(" * 257 + "x" + ")" * 257))
write("deep_parens.burst", "let a = " + "1 + (" * 257 + "1" + ")" * 257 + "\n" + MODEL % "relu(x)")
write("deep_neg.burst", "let a = " + "-" * 257 + "1\n" + MODEL % "relu(x)")
write("deep_lists.burst", "let a = " + "[" * 257 + "1" + "]" * 257 + "\n" + MODEL % "relu(x)")
write("deep_loops.burst", "model m {\n  input x: f32[batch, 4]\n  h = relu(x)\n" +
      "for i in 0..1 {\n" * 33 + "h = relu(h)\n" + "}\n" * 33 + "}\n")
# block b0() { block b1() { ... return relu(in) } return relu(in) }, 33 deep
write("deep_blocks.burst", "".join("block b%d() {\n" % i for i in range(33)) +
      "return relu(in)\n}\n" * 33 + MODEL % "relu(x)")
# 60 blocks, each calling the next inside 20 nested loops: 60 * 21 levels.
text = "block b60() {\n  return relu(in)\n}\n"
for i in range(59, -1, -1):
    text += ("block b%d() {\n  h = relu(in)\n" % i + "for i in 0..1 {\n" * 20 +
             "h = b%d(h)\n" % (i + 1) + "}\n" * 20 + "  return relu(h)\n}\n")
write("deep_expansion.burst", text + MODEL % "b0(x)")
for i in range(250):
    write("imports/%d.burst" % i, 'import "%d.burst"\nlet v%d = 1\n' % (i + 1, i))
write("imports/250.burst", "let last = 1\n")
