"""Writes one .burst file per class of input the compiler accepts (roundtrip_classes.test)."""
import os
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
GPU = "gpu g { flops f32 = 10 TFLOPS, flops bf16 = 100 TFLOPS, memory = 900 TB, bandwidth = 900 GB/s }\n"
MODEL = "model m {\n  input x: f32[batch, 8]\n  input y: i32[batch]\n  h = linear(x, out = 4)\n  loss = cross_entropy(h, y)\n}\n"
classes = {
    # Libraries: nothing that lowers to IR, so the empty module.
    "blocks_only": "block twice() {\n  h = relu(in)\n  return relu(h)\n}\n",
    "lets_only": "let a = 3\nlet b = a * 2\n",
    "blocks_and_lets": "let c = 4\nblock b(k = c) {\n  return relu(in)\n}\n",
    "imports_only": 'import "lets_only.burst"\n',
    # Hardware alone.
    "gpu_only": GPU,
    "gpu_efficiency": "gpu e { flops f32 = 1 TFLOPS, memory = 1 GiB, bandwidth = 1 GB/s, launch = 0 s, efficiency = 0.5, half_work = 0 }\n",
    "cluster_one_gpu_per_node": GPU + "cluster c { gpu = g, gpus_per_node = 1 }\n",
    "cluster_nodes": GPU + "cluster c { gpu = g, nodes = 4, gpus_per_node = 2, nvlink = 300 GB/s @ 2 us, network = 25 GB/s @ 5 us }\n",
    # Models.
    "model_only": MODEL,
    "model_ops": "model n {\n  input x: f32[batch, 3, 16, 16]\n  p = maxpool2d(x, kernel = 2)\n"
                 "  q = avgpool2d(p, kernel = 3, stride = 1, pad = 1, ceil = 1)\n"
                 "  c = concat(" + ", ".join(["q"] * 70) + ")\n  d = dropout(c, p = 1e-300)\n"
                 "  f = flatten(d)\n  r = reshape(f, shape = [-1, 70])\n}\n",
    "long_let": "let w = " + " + ".join(["1"] * 40000) + "\nmodel w {\n  input x: f32[batch, w]\n  h = relu(x)\n}\n",
    # Jobs.
    "job_full": GPU + "cluster c { gpu = g, gpus_per_node = 2, nvlink = 300 GB/s @ 2 us }\n" + MODEL +
                "".join("model bg%d {\n  input x: f32[batch, 4]\n  h = relu(x)\n}\n" % i for i in range(20)) +
                "job j { model = m, cluster = c, batch = 2147483648, dtype = bf16, iterations = 1099511627776,\n"
                "  optimizer = adam(lr = 1e-4, weight_decay = 0.01), amplification = 1.5,\n"
                "  data = \"/some where/data set.bin\", slowdown = 1,\n"
                "  background = [" + ", ".join("bg%d @ %d" % (i, 2147483648 - i) for i in range(20)) + "] }\n"
                "job k { model = m, cluster = c, batch = 8, amplification = auto, optimizer = sgd(lr = 0.5, momentum = 0.9) }\n"
                "job l { model = m, cluster = c, batch = 8, amplification = none, data = fmnist }\n",
}
for name, text in classes.items():
    with open(os.path.join(out, name + ".burst"), "w") as f:
        f.write(text)
