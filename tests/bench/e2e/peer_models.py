"""The PyTorch twins of the networks the CPU benchmarks train, and the environment every
PyTorch process of a benchmark starts with.

fmnist: examples/models/fmnist_cnn.burst (examples/jobs/fmnist_cpu.burst: batch 64, SGD lr
0.05 momentum 0.9, Fashion-MNIST); resnet: examples/models/resnet_small.burst
(examples/jobs/resnet_small_cpu.burst: batch 32, SGD lr 0.01, synthetic data). Layer for
layer the same shapes, bias flags and optimizer settings as burstc's programs.

Thread variables must be in the environment before torch is imported (Debian's torch
reads OMP_NUM_THREADS once; torch.set_num_threads does not reach OpenBLAS, which its
linear layers call), so the benchmarks start PyTorch in a fresh interpreter with
thread_env() and import this module there.
"""
import os

JOBS = {"fmnist": "examples/jobs/fmnist_cpu.burst", "resnet": "examples/jobs/resnet_small_cpu.burst"}
BATCH = {"fmnist": 64, "resnet": 32}
FMNIST = "/usr/share/datasets/fashion-mnist"

# glibc's malloc returns freed blocks over 128 KiB to the kernel (mmap threshold, trim
# threshold), so a PyTorch step that frees and reallocates its activations page-faults
# them in again; these tunables keep them in the process (PyTorch's own docs suggest
# jemalloc/tcmalloc for the same reason).
MALLOC_TUNED = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=17179869184"


def thread_env(threads, tuned, base=None):
    """The environment of a PyTorch process: every thread knob at `threads`, and the
    malloc tunables when `tuned`."""
    env = dict(base if base is not None else os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS",
                "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
        env[var] = str(threads)
    env.pop("GLIBC_TUNABLES", None)
    if tuned:
        env["GLIBC_TUNABLES"] = MALLOC_TUNED
    return env


def build(net):
    import torch.nn as nn
    if net == "fmnist":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
    return ResNetSmall()


def optimizer(net, params):
    import torch
    if net == "fmnist":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9)
    return torch.optim.SGD(params, lr=0.01)


def _resnet_classes():
    import torch
    import torch.nn as nn

    class ConvBnRelu(nn.Module):
        def __init__(self, cin, c, k=3):
            super().__init__()
            self.conv = nn.Conv2d(cin, c, k, padding=k // 2, bias=False)
            self.bn = nn.BatchNorm2d(c)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(x)))

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a = ConvBnRelu(c, c)
            self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(c)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(self.a(x))) + x)

    class TwoPath(nn.Module):
        def __init__(self, cin, c):
            super().__init__()
            self.p3 = ConvBnRelu(cin, c, 3)
            self.p5 = ConvBnRelu(cin, c, 5)

        def forward(self, x):
            return torch.cat([self.p3(x), self.p5(x)], 1)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = ConvBnRelu(1, 32)
            self.h = nn.Sequential(Residual(32), Residual(32))
            self.mix = TwoPath(32, 32)
            self.pool = nn.MaxPool2d(2)
            self.r = Residual(64)
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            h = self.r(self.pool(self.mix(self.h(self.stem(x)))))
            return self.fc(torch.flatten(h.mean((2, 3)), 1))

    return Net


def ResNetSmall():
    return _resnet_classes()()


def data(net, samples):
    """Inputs and labels: the first `samples` Fashion-MNIST training images for fmnist,
    uniform random ones for resnet (burstc's job trains on synthetic data)."""
    import gzip
    import numpy as np
    import torch
    if net == "resnet":
        g = torch.Generator().manual_seed(1)
        return torch.rand(samples, 1, 28, 28, generator=g), torch.randint(0, 10, (samples,), generator=g)
    with gzip.open(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(FMNIST, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    idx = np.arange(samples) % len(y)
    return (torch.from_numpy(x[idx].astype(np.float32) / 255.0), torch.from_numpy(y[idx].astype(np.int64)))


def wait_quiet(limit_s, running=1):
    """Waits (at most limit_s seconds) until the machine is idle but for this script: at
    most `running` runnable tasks in /proc/stat for two seconds in a row. Returns the
    seconds waited. The benchmarks share a machine with other people's builds; a run
    that starts in a quiet moment is more likely to stay in one."""
    import time
    t0 = time.time()
    quiet = 0
    while time.time() - t0 < limit_s and quiet < 4:
        with open("/proc/stat") as f:
            n = next(int(l.split()[1]) for l in f if l.startswith("procs_running"))
        quiet = quiet + 1 if n <= running else 0
        time.sleep(0.5)
    return time.time() - t0
