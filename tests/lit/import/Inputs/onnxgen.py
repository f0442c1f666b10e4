#!/usr/bin/python3
"""onnxgen.py: the small ONNX files of the `burstc import` tests, built at test time.

    onnxgen.py make CASE OUT.onnx   writes the model of CASE
    onnxgen.py params CASE          prints its trainable parameters: "N parameters"
    onnxgen.py list                 the cases

Models are built with onnx.helper (Debian's python3-onnx), the way exporters
write them. Every initializer is declared with its role, so the expected
parameter count is the sum of the sizes of the trainable ones, computed here,
apart from burstc. Files that are broken on purpose (truncated, not protobuf,
lying about lengths, nested too deep) are written byte by byte.
"""
import math
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64


class Model:
    """A graph under construction: nodes, initializers (with roles), inputs, outputs."""

    def __init__(self, opset=14):
        self.opset = opset
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.params = 0
        self.count = 0

    def input(self, name, shape, elem=F):
        self.inputs.append(helper.make_tensor_value_info(name, elem, shape))
        return name

    def output(self, name):
        self.outputs.append(helper.make_tensor_value_info(name, F, None))

    def init(self, name, dims, param=True, values=None, elem=F):
        """An initializer; param: a trainable parameter (counted)."""
        if values is None:
            data = np.zeros(dims, np.float32 if elem == F else np.int64)
        else:
            data = np.array(values, np.float32 if elem == F else np.int64).reshape(dims)
        self.inits.append(helper.make_tensor(name, elem, dims, data.tobytes(), raw=True))
        if param:
            self.params += int(np.prod(dims))
        return name

    def const(self, values, elem=I64, dims=None):
        """A Constant node holding values; returns its output."""
        self.count += 1
        name = "c%d" % self.count
        arr = np.array(values, {I64: np.int64, F: np.float32, TensorProto.BOOL: np.bool_}[elem])
        dims = list(arr.shape) if dims is None else dims
        t = helper.make_tensor(name + "_t", elem, dims, arr.flatten().tolist())
        self.nodes.append(helper.make_node("Constant", [], [name], name=name, value=t))
        return name

    def node(self, op, inputs, name, outputs=None, **attrs):
        outs = outputs or [name + "_out"]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def model(self):
        g = helper.make_graph(self.nodes, "g", self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)],
                              producer_name="onnxgen", producer_version="1")
        m.ir_version = 8
        return m


def linear(m, x, din, dout, name, bias=True):
    """MatMul by a weight (and the Add of its bias), as torch exports nn.Linear on 3-d input."""
    w = m.init(name + ".weight", [din, dout])
    y = m.node("MatMul", [x, w], name + "/MatMul")
    if bias:
        b = m.init(name + ".bias", [dout])
        y = m.node("Add", [b, y], name + "/Add")
    return y


# ---- supported ops ----

def case_cnn():
    """Conv (bias, stride, pads, dilation, groups), Relu, pools, Flatten, Gemm, Softmax."""
    m = Model()
    x = m.input("image", [1, 3, 32, 32])
    c1 = m.node("Conv", [x, m.init("c1.w", [16, 3, 3, 3]), m.init("c1.b", [16])], "conv1",
                kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    r1 = m.node("Relu", [c1], "relu1")
    p1 = m.node("MaxPool", [r1], "pool1", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                ceil_mode=1)
    c2 = m.node("Conv", [p1, m.init("c2.w", [32, 4, 3, 3])], "conv2", kernel_shape=[3, 3],
                group=4, dilations=[2, 2], pads=[2, 2, 2, 2], strides=[2, 1])
    c3 = m.node("Conv", [c2, m.init("c3.w", [32, 32, 1, 5])], "conv3", auto_pad="SAME_UPPER")
    a1 = m.node("AveragePool", [c3], "avg_incl", kernel_shape=[3, 3], strides=[1, 1],
                pads=[1, 1, 1, 1], count_include_pad=1)
    a2 = m.node("AveragePool", [a1], "avg_excl", kernel_shape=[2, 2], strides=[2, 2],
                pads=[1, 1, 1, 1])
    g = m.node("GlobalAveragePool", [a2], "gap")
    f = m.node("Flatten", [g], "flatten", axis=1)
    fc = m.node("Gemm", [f, m.init("fc.w", [10, 32]), m.init("fc.b", [10])], "fc", transB=1)
    m.node("Softmax", [fc], "probs", outputs=["probs"], axis=-1)
    m.output("probs")
    return m


def case_batchnorm():
    """BatchNormalization of 4-d and 2-d inputs; its running statistics are not parameters."""
    m = Model(15)
    x = m.input("x", [1, 3, 8, 8])
    c = m.node("Conv", [x, m.init("conv.w", [4, 3, 3, 3])], "conv", kernel_shape=[3, 3])
    bn = m.node("BatchNormalization",
                [c, m.init("bn.scale", [4]), m.init("bn.bias", [4]),
                 m.init("bn.mean", [4], param=False), m.init("bn.var", [4], param=False)],
                "bn", outputs=["bn_y", "bn_rm", "bn_rv"], epsilon=1e-3, momentum=0.99,
                training_mode=1)[0]
    f = m.node("Flatten", [bn], "flatten")
    fc = m.node("Gemm", [f, m.init("fc.w", [144, 6]), m.init("fc.b", [6])], "fc")
    bn1 = m.node("BatchNormalization",
                 [fc, m.init("bn1.scale", [6]), m.init("bn1.bias", [6]),
                  m.init("bn1.mean", [6], param=False), m.init("bn1.var", [6], param=False)],
                 "bn1d")
    m.node("Relu", [bn1], "out", outputs=["out"])
    m.output("out")
    return m


def case_residual():
    """Add of two activations, Concat of branches, an inception-style Pad + AveragePool."""
    m = Model()
    x = m.input("x", [1, 8, 16, 16])
    a = m.node("Conv", [x, m.init("a.w", [8, 8, 3, 3])], "branch_a/conv", kernel_shape=[3, 3],
               pads=[1, 1, 1, 1])
    s = m.node("Add", [a, x], "residual")
    b = m.node("Conv", [s, m.init("b.w", [4, 8, 1, 1])], "branch_b/conv", kernel_shape=[1, 1])
    pad = m.node("Pad", [s, m.const([0, 0, 1, 1, 0, 0, 1, 1])], "pool/Pad", mode="constant")
    p = m.node("AveragePool", [pad], "pool/AveragePool", kernel_shape=[3, 3], strides=[1, 1])
    cat = m.node("Concat", [s, b, p], "cat", axis=1)
    g = m.node("GlobalAveragePool", [cat], "gap")
    f = m.node("Flatten", [g], "flat")
    m.node("Gemm", [f, m.init("fc.w", [20, 5]), m.init("fc.b", [5])], "fc", outputs=["logits"])
    m.output("logits")
    return m


def case_linear():
    """MatMul + Add of a bias (linear layers on [N,T,D]), a MatMul without bias, Gemm."""
    m = Model()
    x = m.input("x", [1, 4, 16])
    h = linear(m, x, 16, 32, "fc1")
    h = m.node("Relu", [h], "act")
    h = linear(m, h, 32, 8, "fc2", bias=False)
    f = m.node("Reshape", [h, m.const([0, -1])], "flat")
    m.node("Gemm", [f, m.init("head.w", [32, 3])], "head", outputs=["logits"])
    m.output("logits")
    return m


def case_dropout():
    """Dropout with its ratio as an input (opset 13) and its mask unused."""
    m = Model(13)
    x = m.input("x", [1, 10])
    h = m.node("Gemm", [x, m.init("fc.w", [10, 10]), m.init("fc.b", [10])], "fc")
    d = m.node("Dropout", [h, m.const(0.25, TensorProto.FLOAT), m.const(True, TensorProto.BOOL)],
               "drop", outputs=["d", "mask"])[0]
    d2 = m.node("Dropout", [d], "drop_default")
    m.node("Gemm", [d2, m.init("out.w", [10, 2])], "out", outputs=["logits"])
    m.output("logits")
    return m


def case_dropout_opset10():
    """Dropout before opset 12: the ratio is an attribute."""
    m = Model(10)
    x = m.input("x", [1, 10])
    d = m.node("Dropout", [x], "drop", ratio=0.3)
    m.node("Gemm", [d, m.init("out.w", [10, 2]), m.init("out.b", [2])], "out", outputs=["logits"])
    m.output("logits")
    return m


def layernorm_decomposed(m, x, d, name, eps=1e-5):
    """LayerNorm as torch exports it before opset 17."""
    mean = m.node("ReduceMean", [x], name + "/ReduceMean", axes=[-1])
    c = m.node("Sub", [x, mean], name + "/Sub")
    sq = m.node("Pow", [c, m.const(2.0, F)], name + "/Pow")
    var = m.node("ReduceMean", [sq], name + "/ReduceMean_1", axes=[-1])
    ve = m.node("Add", [var, m.const(eps, F)], name + "/Add")
    sd = m.node("Sqrt", [ve], name + "/Sqrt")
    n = m.node("Div", [c, sd], name + "/Div")
    s = m.node("Mul", [n, m.init(name + ".weight", [d])], name + "/Mul")
    return m.node("Add", [s, m.init(name + ".bias", [d])], name + "/Add_1")


def case_layernorm():
    """LayerNormalization (opset 17) and the same spelled out in nine nodes."""
    m = Model(17)
    x = m.input("x", [1, 6, 12])
    a = m.node("LayerNormalization", [x, m.init("ln1.w", [12]), m.init("ln1.b", [12])], "ln1",
               epsilon=1e-6)
    b = layernorm_decomposed(m, a, 12, "ln2")
    m.node("Identity", [b], "out", outputs=["out"])
    m.output("out")
    return m


def gelu_erf(m, x, name):
    d = m.node("Div", [x, m.const(1.4142135, F)], name + "/Div")
    e = m.node("Erf", [d], name + "/Erf")
    a = m.node("Add", [e, m.const(1.0, F)], name + "/Add")
    p = m.node("Mul", [x, a], name + "/Mul")
    return m.node("Mul", [p, m.const(0.5, F)], name + "/Mul_1")


def gelu_tanh(m, x, name):
    """Hugging Face's NewGELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    h = m.node("Mul", [x, m.const(0.5, F)], name + "/Mul")
    cube = m.node("Pow", [x, m.const(3.0, F)], name + "/Pow")
    s = m.node("Mul", [cube, m.const(0.044715, F)], name + "/Mul_1")
    a = m.node("Add", [x, s], name + "/Add")
    t = m.node("Mul", [a, m.const(math.sqrt(2 / math.pi), F)], name + "/Mul_2")
    th = m.node("Tanh", [t], name + "/Tanh")
    one = m.node("Add", [th, m.const(1.0, F)], name + "/Add_1")
    return m.node("Mul", [h, one], name + "/Mul_3")


def case_gelu():
    """GELU in the erf form (nn.GELU) and the tanh form (GPT-2's), and the Gelu op, exact
    (its default) and with approximate="tanh"."""
    m = Model(14)
    x = m.input("x", [1, 4, 8])
    a = gelu_erf(m, linear(m, x, 8, 8, "fc1"), "act1")
    b = gelu_tanh(m, linear(m, a, 8, 8, "fc2"), "act2")
    c = m.node("Gelu", [b], "act3")
    c = m.node("Gelu", [c], "act4", approximate="tanh")
    m.node("Identity", [c], "out", outputs=["out"])
    m.output("out")
    return m


def attention(m, x, d, heads, t, name, causal=True, fused=True):
    """Self-attention as torch exports the nanoGPT/GPT-2 module."""
    hd = d // heads
    if fused:
        qkv = linear(m, x, d, 3 * d, name + "/c_attn")
        q, k, v = m.node("Split", [qkv, m.const([d, d, d])], name + "/Split",
                         outputs=[name + "/q", name + "/k", name + "/v"], axis=2)
    else:
        q = linear(m, x, d, d, name + "/q_proj")
        k = linear(m, x, d, d, name + "/k_proj")
        v = linear(m, x, d, d, name + "/v_proj")
    shape = m.const([1, t, heads, hd])
    q = m.node("Transpose", [m.node("Reshape", [q, shape], name + "/Reshape")],
               name + "/Transpose", perm=[0, 2, 1, 3])
    k = m.node("Transpose", [m.node("Reshape", [k, shape], name + "/Reshape_1")],
               name + "/Transpose_1", perm=[0, 2, 3, 1])
    v = m.node("Transpose", [m.node("Reshape", [v, shape], name + "/Reshape_2")],
               name + "/Transpose_2", perm=[0, 2, 1, 3])
    s = m.node("MatMul", [q, k], name + "/MatMul")
    if causal:
        s = m.node("Mul", [s, m.const(1 / math.sqrt(hd), F)], name + "/Mul")
        mask = m.const(np.triu(np.ones((t, t)), 1).astype(bool).reshape(1, 1, t, t),
                       TensorProto.BOOL)
        s = m.node("Where", [mask, m.const(-1e9, F), s], name + "/Where")
    else:
        s = m.node("Div", [s, m.const(math.sqrt(hd), F)], name + "/Div")
    p = m.node("Softmax", [s], name + "/Softmax", axis=-1)
    p = m.node("Dropout", [p, m.const(0.1, F)], name + "/attn_dropout")
    y = m.node("MatMul", [p, v], name + "/MatMul_1")
    y = m.node("Transpose", [y], name + "/Transpose_3", perm=[0, 2, 1, 3])
    y = m.node("Reshape", [y, m.const([1, t, d])], name + "/Reshape_3")
    return linear(m, y, d, d, name + "/c_proj")


def mha(m, x, d, heads, t, name, batch=None):
    """nn.MultiheadAttention (batch_first) as torch 1.13 exports it: to [T,N,D], one in-projection
    [3D, D] sliced into q, k, v, heads as [N*H,T,D/H], q scaled first, the output projection
    a Gemm on [T*N, D], back to [N,T,D]. Reshapes copy (0) and infer (-1) the batch, or with
    batch, a traced export's, hold it multiplied in as numbers."""
    hd = d // heads
    xt = m.node("Transpose", [x], name + "/Transpose", perm=[1, 0, 2])
    w = m.node("Transpose", [m.init(name + ".in_proj_weight", [3 * d, d])], name + "/Transpose_1",
               perm=[1, 0])
    qkv = m.node("Add", [m.init(name + ".in_proj_bias", [3 * d]),
                         m.node("MatMul", [xt, w], name + "/MatMul")], name + "/Add")
    m.node("Shape", [qkv], name + "/Shape")  # torch sizes the split from it
    parts = []
    for i, perm in enumerate([[1, 0, 2], [1, 2, 0], [1, 0, 2]]):
        sl = m.node("Slice", [qkv, m.const([i * d]), m.const([(i + 1) * d]), m.const([-1])],
                    name + "/Slice_%d" % i)
        r = m.node("Reshape", [sl, m.const([t, batch * heads, hd] if batch else [0, -1, hd])],
                   name + "/Reshape_%d" % i)
        parts.append(m.node("Transpose", [r], name + "/Transpose_q%d" % i, perm=perm))
    q = m.node("Div", [parts[0], m.const(math.sqrt(hd), F)], name + "/Div")
    p = m.node("Softmax", [m.node("MatMul", [q, parts[1]], name + "/MatMul_1")],
               name + "/Softmax", axis=-1)
    y = m.node("Transpose", [m.node("MatMul", [p, parts[2]], name + "/MatMul_2")],
               name + "/Transpose_5", perm=[1, 0, 2])
    y = m.node("Reshape", [y, m.const([t * batch if batch else -1, d])], name + "/Reshape_3")
    y = m.node("Gemm", [y, m.init(name + ".out_proj.weight", [d, d]),
                        m.init(name + ".out_proj.bias", [d])], name + "/Gemm", transB=1)
    m.node("Shape", [y], name + "/Shape_6")
    y = m.node("Reshape", [y, m.const([t, batch or -1, d])], name + "/Reshape_4")
    return m.node("Transpose", [y], name + "/Transpose_6", perm=[1, 0, 2])


def case_vit(batch=None):
    """torchvision's ViT in small: patches, a class token expanded to the batch, learned
    positions, nn.MultiheadAttention, the class token's row to the head."""
    m = Model(14)
    d = 8
    x = m.input("x", [batch or "batch", 3, 8, 8])
    p = m.node("Conv", [x, m.init("conv_proj.weight", [d, 3, 4, 4]), m.init("conv_proj.bias", [d])],
               "conv_proj", kernel_shape=[4, 4], strides=[4, 4])
    p = m.node("Transpose", [m.node("Reshape", [p, m.const([0, d, -1])], "Reshape")],
               "Transpose", perm=[0, 2, 1])
    n = m.node("Unsqueeze", [m.node("Gather", [m.node("Shape", [x], "Shape"), m.const(0)],
                                    "Gather_n", axis=0), m.const([0])], "Unsqueeze")
    shape = m.node("Concat", [n, m.const([1, d])], "Concat_shape", axis=0) if not batch else \
        m.const([batch, 1, d])
    cls = m.node("Expand", [m.init("class_token", [1, 1, d]), shape], "Expand")
    h = m.node("Concat", [cls, p], "Concat_2", axis=1)
    h = m.node("Add", [h, m.init("encoder.pos_embedding", [1, 5, d])], "encoder/Add")
    a = mha(m, h, d, 2, 5, "encoder/self_attention", batch)
    h = m.node("Add", [a, h], "encoder/Add_1")
    c = m.node("Gather", [h, m.const(0)], "Gather", axis=1)
    m.node("Gemm", [c, m.init("head.weight", [10, d]), m.init("head.bias", [10])], "head",
           outputs=["logits"], transB=1)
    m.output("logits")
    return m


def case_vit_traced():
    """The same traced at batch 3: the class token expanded to 3, and 3 x heads, 5 x 3 and 3
    written into the attention's reshapes."""
    return case_vit(3)


def case_positions_only():
    """Learned positions added to patches without a class token: tokens with cls = 0."""
    m = Model(14)
    x = m.input("x", ["batch", 6, 4])
    h = m.node("Add", [x, m.init("pos", [1, 6, 4])], "pos_add")
    m.node("Relu", [h], "relu", outputs=["out"])
    m.output("out")
    return m


def case_gpt():
    """A two-block GPT: embeddings with positions, attention, MLP, a tied head."""
    m = Model(14)
    t, d, vocab = 8, 16, 50
    ids = m.input("ids", [1, t], I64)
    wte = m.init("wte.weight", [vocab, d])
    tok = m.node("Gather", [wte, ids], "wte/Gather")
    pos = m.node("Gather", [m.init("wpe.weight", [t + 4, d]), m.const(list(range(t)))],
                 "wpe/Gather")
    h = m.node("Add", [tok, pos], "embed/Add")
    for i in range(2):
        a = attention(m, layernorm_decomposed(m, h, d, "h.%d/ln_1" % i), d, 4, t,
                      "h.%d/attn" % i, causal=True, fused=(i == 0))
        h = m.node("Add", [h, a], "h.%d/Add" % i)
        f = linear(m, layernorm_decomposed(m, h, d, "h.%d/ln_2" % i), d, 4 * d, "h.%d/mlp/fc" % i)
        f = linear(m, gelu_erf(m, f, "h.%d/mlp/act" % i), 4 * d, d, "h.%d/mlp/proj" % i)
        h = m.node("Add", [h, f], "h.%d/Add_1" % i)
    h = layernorm_decomposed(m, h, d, "ln_f")
    wt = m.node("Transpose", [wte], "lm_head/Transpose", perm=[1, 0])
    m.node("MatMul", [h, wt], "lm_head/MatMul", outputs=["logits"])
    m.output("logits")
    return m


def case_attention_plain():
    """Attention without a mask, from three projections, scaled by a Div."""
    m = Model(14)
    x = m.input("x", [1, 6, 8])
    a = attention(m, x, 8, 2, 6, "attn", causal=False, fused=False)
    m.node("Identity", [a], "out", outputs=["out"])
    m.output("out")
    return m


def case_learned_positions():
    """Positions as a learned tensor added to the token embeddings (ViT, folded exports)."""
    m = Model(14)
    ids = m.input("tokens", [1, 5], TensorProto.INT32)
    e = m.node("Gather", [m.init("embed.weight", [30, 4]), ids], "embed")
    h = m.node("Add", [e, m.init("pos", [1, 5, 4])], "pos_add")
    linear(m, h, 4, 30, "head")
    m.outputs.append(helper.make_tensor_value_info(m.nodes[-1].output[0], F, None))
    return m


def case_dynamic_batch():
    """A symbolic batch, and the Shape/Gather/Unsqueeze/Concat chain exports reshape with."""
    m = Model(13)
    x = m.input("x", ["batch_size", 4, 6])
    sh = m.node("Shape", [x], "shape")
    n = m.node("Gather", [sh, m.const(0)], "batch", axis=0)
    n1 = m.node("Unsqueeze", [n, m.const([0])], "batch_1")
    target = m.node("Concat", [n1, m.const([-1])], "target", axis=0)
    f = m.node("Reshape", [x, target], "flat")
    h = m.node("Gemm", [f, m.init("fc.w", [24, 6]), m.init("fc.b", [6])], "fc")
    u = m.node("Unsqueeze", [h, m.const([2])], "unsq")
    s = m.node("Squeeze", [u, m.const([2])], "sq")
    c = m.node("Cast", [s], "cast", to=F)
    m.node("Identity", [c], "logits", outputs=["logits"])
    m.output("logits")
    return m


def case_static_batch():
    """Exported at batch 4: the 4 in a reshape's target is the batch."""
    m = Model(14)
    x = m.input("x", [4, 2, 3, 5])
    t = m.node("Transpose", [x], "swap", perm=[0, 1, 3, 2])
    f = m.node("Reshape", [t, m.const([4, 30])], "flat")
    r = m.node("Reshape", [f, m.const([4, 6, 5])], "unflat")
    m.node("Softmax", [r], "sm", axis=1, outputs=["out"])
    m.output("out")
    return m


def case_permute():
    """convnext's layer norm over channels: [N,C,H,W] -> [N,H,W,C], normalize, and back;
    a 5-d rotation, a 2-cycle and the identity."""
    m = Model(14)
    x = m.input("x", [2, 4, 6, 5])
    t = m.node("Transpose", [x], "to_nhwc", perm=[0, 2, 3, 1])
    ln = layernorm_decomposed(m, t, 4, "ln")
    b = m.node("Transpose", [ln], "to_nchw", perm=[0, 3, 1, 2])
    b = m.node("Transpose", [b], "same", perm=[0, 1, 2, 3])
    r = m.node("Reshape", [b, m.const([2, 4, 3, 2, 5])], "split_h")
    r = m.node("Transpose", [r], "rotate", perm=[0, 4, 1, 2, 3])
    r = m.node("Transpose", [r], "swap", perm=[0, 1, 2, 4, 3])
    m.node("Reshape", [r, m.const([2, 120])], "flat", outputs=["out"])
    m.output("out")
    return m


def case_names():
    """Names: scopes, characters, keywords, repeats, no name at all."""
    m = Model()
    x = m.input("input.1", [1, 4])
    a = m.node("Relu", [x], "/layer1/layer1.0/relu/Relu")
    b = m.node("Relu", [a], "model")
    c = m.node("Relu", [b], "7up")
    d = m.node("Relu", [c], "dup", outputs=["d1"])
    e = m.node("Relu", [d], "dup", outputs=["d2"])
    f = m.node("Relu", [e], "", outputs=["unnamed:0"])
    # A '"' in a name: no Burst string holds it, so the weights section leaves it out.
    m.node("Gemm", [f, m.init("w", [4, 3]), m.init('b"ias', [3])], "a-b c", outputs=["logits"])
    m.output("logits")
    return m


def case_unsorted():
    """Nodes out of order: burstc orders them."""
    m = case_names()
    m.nodes.reverse()
    return m


def case_shared():
    """One initializer read by two layers (an export that merged equal tensors)."""
    m = Model(17)
    x = m.input("x", [1, 4, 6])
    w, b = m.init("ln.w", [6]), m.init("ln.b", [6])
    a = m.node("LayerNormalization", [x, w, b], "ln_a")
    c = m.node("LayerNormalization", [a, m.node("Identity", [w], "w_copy"), b], "ln_b")
    m.node("Identity", [c], "out", outputs=["out"])
    m.output("out")
    m.params *= 2  # each layer norm holds its scale and bias in Burst
    return m


def case_accounting():
    """Initializers that are constants (a reshape target) or that no node reads."""
    m = Model()
    x = m.input("x", [1, 2, 3])
    f = m.node("Reshape", [x, m.init("target", [2], param=False, values=[1, 6], elem=I64)],
               "flat")
    m.init("unused", [7, 7], param=False)
    m.node("Gemm", [f, m.init("fc.w", [6, 2])], "fc", outputs=["logits"])
    m.output("logits")
    return m


def case_two_outputs():
    """Two classifier outputs (inception's aux head): two losses."""
    m = Model()
    x = m.input("x", [1, 8])
    a = m.node("Gemm", [x, m.init("a.w", [8, 3])], "main", outputs=["logits"])
    m.node("Gemm", [x, m.init("b.w", [8, 2])], "aux", outputs=["aux"])
    m.node("Relu", [a], "feature", outputs=["feature"])
    m.output("logits")
    m.output("aux")
    return m


def case_tanh_sigmoid():
    """Tanh and Sigmoid on their own."""
    m = Model()
    x = m.input("x", [1, 8])
    h = m.node("Gemm", [x, m.init("fc.w", [8, 8])], "fc")
    t = m.node("Tanh", [h], "tanh")
    s = m.node("Sigmoid", [h], "gate")
    a = m.node("Add", [t, s], "sum")
    m.node("Gemm", [a, m.init("out.w", [8, 2])], "out", outputs=["logits"])
    m.output("logits")
    return m


def case_clip():
    """ReLU6 as torch exports it (Clip between two Constants) after a depthwise convolution,
    Clip with a lower bound only (relu), and Clip's attributes before opset 11."""
    m = Model()
    x = m.input("x", [1, 4, 8, 8])
    h = m.node("Conv", [x, m.init("dw.weight", [4, 1, 3, 3])], "dw", group=4, pads=[1, 1, 1, 1],
               kernel_shape=[3, 3])
    r6 = m.node("Clip", [h, m.const(0.0, F, []), m.const(6.0, F, [])], "relu6")
    r = m.node("Clip", [r6, m.const(0.0, F, [])], "relu")
    p = m.node("GlobalAveragePool", [r], "pool")
    f = m.node("Flatten", [p], "flat")
    m.node("Gemm", [f, m.init("fc.weight", [3, 4]), m.init("fc.bias", [3])], "fc",
           outputs=["logits"], transB=1)
    m.output("logits")
    return m


def case_reduce_mean():
    """The mean over H and W as mnasnet ends (keepdims 0) and with keepdims and a Flatten."""
    m = Model()
    x = m.input("x", [1, 4, 8, 8])
    h = m.node("Conv", [x, m.init("conv.weight", [4, 4, 1, 1])], "conv", kernel_shape=[1, 1])
    a = m.node("ReduceMean", [h], "mean", axes=[2, 3], keepdims=0)
    b = m.node("ReduceMean", [h], "mean_keep", axes=[-1, -2])
    f = m.node("Flatten", [b], "flat")
    s = m.node("Add", [a, f], "sum")
    m.node("Gemm", [s, m.init("fc.weight", [3, 4])], "fc", outputs=["logits"], transB=1)
    m.output("logits")
    return m


def case_reduce_mean_axes():
    """Means burstc has no op for: over the channels, and over H alone."""
    m = Model()
    x = m.input("x", [1, 4, 8, 8])
    h = m.node("Conv", [x, m.init("conv.weight", [4, 4, 1, 1])], "conv", kernel_shape=[1, 1])
    m.node("ReduceMean", [h], "over_c", axes=[1], keepdims=0, outputs=["c"])
    m.node("ReduceMean", [h], "over_h", axes=[2], keepdims=0, outputs=["h"])
    m.output("c")
    m.output("h")
    return m


def case_squeeze_excitation():
    """torchvision's SqueezeExcitation (regnet, mobilenet_v3): the gate [N,C,1,1] first, times
    the activation [N,C,H,W]; then a Mul of two activations of one shape."""
    m = Model()
    x = m.input("x", [1, 4, 8, 8])
    h = m.node("Conv", [x, m.init("conv.weight", [4, 4, 1, 1])], "conv", kernel_shape=[1, 1])
    p = m.node("GlobalAveragePool", [h], "se/avgpool")
    a = m.node("Conv", [p, m.init("se.fc1.weight", [2, 4, 1, 1]), m.init("se.fc1.bias", [2])],
               "se/fc1", kernel_shape=[1, 1])
    a = m.node("Relu", [a], "se/activation")
    g = m.node("Conv", [a, m.init("se.fc2.weight", [4, 2, 1, 1]), m.init("se.fc2.bias", [4])],
               "se/fc2", kernel_shape=[1, 1])
    g = m.node("Sigmoid", [g], "se/scale_activation")
    y = m.node("Mul", [g, h], "se/Mul")
    y = m.node("Mul", [y, h], "square")
    q = m.node("GlobalAveragePool", [y], "pool")
    f = m.node("Flatten", [q], "flat")
    m.node("Gemm", [f, m.init("fc.weight", [3, 4])], "fc", outputs=["logits"], transB=1)
    m.output("logits")
    return m


def case_mul_broadcast():
    """Muls burstc has no op for: by a constant, and by one value per pixel."""
    m = Model()
    x = m.input("x", [1, 4, 8, 8])
    h = m.node("Conv", [x, m.init("conv.weight", [4, 4, 1, 1])], "conv", kernel_shape=[1, 1])
    m.node("Mul", [h, m.const([2.0], F, [1])], "by_two", outputs=["a"])
    w = m.node("Conv", [x, m.init("w.weight", [1, 4, 1, 1])], "w", kernel_shape=[1, 1])
    m.node("Mul", [h, w], "per_pixel", outputs=["b"])
    m.output("a")
    m.output("b")
    return m


def case_channel_split():
    """shufflenet_v2's block: x[:, :C/2] and x[:, C/2:] as Slices (the second's end past the
    axis, as torch writes it), a branch on one half, Concat, then the channel shuffle
    (Reshape to [N,2,C/2,H,W], Transpose of axes 1 and 2, Reshape back)."""
    m = Model()
    x = m.input("x", [1, 4, 8, 8])
    x = m.node("Conv", [x, m.init("stem.weight", [4, 4, 1, 1])], "stem", kernel_shape=[1, 1])
    a = m.node("Slice", [x, m.const([0]), m.const([2]), m.const([1])], "split0")
    b = m.node("Slice", [x, m.const([2]), m.const([9223372036854775807]), m.const([1])], "split1")
    b = m.node("Conv", [b, m.init("branch.weight", [2, 2, 1, 1])], "branch", kernel_shape=[1, 1])
    y = m.node("Concat", [a, b], "cat", axis=1)
    y = m.node("Reshape", [y, m.const([1, 2, 2, 8, 8])], "view")
    y = m.node("Transpose", [y], "shuffle", perm=[0, 2, 1, 3, 4])
    y = m.node("Reshape", [y, m.const([1, 4, 8, 8])], "back")
    q = m.node("GlobalAveragePool", [y], "pool")
    f = m.node("Flatten", [q], "flat")
    m.node("Gemm", [f, m.init("fc.weight", [3, 4])], "fc", outputs=["logits"], transB=1)
    m.output("logits")
    return m


def case_hard():
    """mobilenet_v3's activations: HardSwish, and HardSigmoid as torch exports it (alpha 1/6)."""
    m = Model()
    x = m.input("x", [1, 8])
    h = m.node("Gemm", [x, m.init("fc.w", [8, 8])], "fc")
    a = m.node("HardSwish", [h], "hswish")
    b = m.node("HardSigmoid", [a], "hsig", alpha=1.0 / 6)
    m.node("Gemm", [b, m.init("out.w", [8, 2])], "out", outputs=["logits"])
    m.output("logits")
    return m


def case_silu():
    """nn.SiLU as torch exports it, x * Sigmoid(x), in both orders; a Sigmoid read elsewhere
    too stays a sigmoid."""
    m = Model(14)
    x = m.input("x", [1, 4, 6, 6])
    c = m.node("Conv", [x, m.init("c.w", [4, 4, 1, 1])], "conv", kernel_shape=[1, 1])
    a = m.node("Mul", [c, m.node("Sigmoid", [c], "act/Sigmoid")], "act/Mul")
    b = m.node("Mul", [m.node("Sigmoid", [a], "act2/Sigmoid"), a], "act2/Mul")
    g = m.node("Sigmoid", [b], "gate")
    h = m.node("Mul", [b, g], "not_silu")
    o = m.node("Add", [h, g], "out")
    f = m.node("Flatten", [m.node("GlobalAveragePool", [o], "gap")], "flatten", axis=1)
    m.node("Gemm", [f, m.init("fc.w", [3, 4]), m.init("fc.b", [3])], "fc", outputs=["logits"],
           transB=1)
    m.output("logits")
    return m


def case_hardsigmoid_alpha():
    """HardSigmoid with ONNX's default alpha 0.2 is not torch's: an error naming it."""
    m = Model()
    x = m.input("x", [1, 8])
    m.node("HardSigmoid", [x], "onnx_default", outputs=["y"])
    m.output("y")
    return m


def case_clip_opset10():
    m = Model(opset=10)
    x = m.input("x", [1, 8])
    h = m.node("Gemm", [x, m.init("fc.w", [8, 8])], "fc")
    c = m.node("Clip", [h], "relu6", min=0.0, max=6.0)
    m.node("Gemm", [c, m.init("out.w", [8, 2])], "out", outputs=["logits"])
    m.output("logits")
    return m


# ---- errors ----

def case_clip_bounds():
    """Clips that are neither relu nor relu6: each an error naming its bounds."""
    m = Model()
    x = m.input("x", [1, 8])
    h = m.node("Gemm", [x, m.init("fc.w", [8, 8])], "fc")
    a = m.node("Clip", [h, m.const(-1.0, F, []), m.const(1.0, F, [])], "hardtanh")
    b = m.node("Clip", [h, "", m.const(6.0, F, [])], "upper")
    b = m.node("Add", [a, b], "sum")
    m.node("Gemm", [b, m.init("out.w", [8, 2])], "out", outputs=["logits"])
    m.output("logits")
    return m


def case_unsupported():
    """Ops burstc cannot map: each named with its position; the others still checked."""
    m = Model()
    x = m.input("x", [1, 3, 8, 8])
    a = m.node("LeakyRelu", [x], "act/leaky")
    b = m.node("Resize", [a, "", m.const([1.0, 1.0, 2.0, 2.0], F)], "up")
    m.node("Relu", [b], "out", outputs=["out"])
    m.output("out")
    return m


def case_foreign_domain():
    m = Model()
    x = m.input("x", [1, 4])
    m.nodes.append(helper.make_node("FusedGemm", [x], ["y"], name="fused", domain="com.microsoft"))
    m.output("y")
    return m


def case_symbolic_dim():
    m = Model()
    x = m.input("x", ["N", "seq", 4])
    m.node("Relu", [x], "r", outputs=["y"])
    m.output("y")
    return m


def case_runtime_shape():
    """A reshape whose target is an input: a shape only known at run time."""
    m = Model()
    x = m.input("x", [1, 12])
    s = m.input("target", [1, 2], I64)
    m.node("Reshape", [x, s], "reshape", outputs=["y"])
    m.output("y")
    return m


def case_cycle():
    m = Model()
    x = m.input("x", [1, 4])
    m.nodes.append(helper.make_node("Add", [x, "c"], ["a"], name="first"))
    m.nodes.append(helper.make_node("Relu", ["a"], ["b"], name="second"))
    m.nodes.append(helper.make_node("Relu", ["b"], ["c"], name="third"))
    m.output("c")
    return m


def case_dangling():
    m = Model()
    x = m.input("x", [1, 4])
    m.node("Add", [x, "nowhere"], "add", outputs=["y"])
    m.output("y")
    return m


def case_twice():
    m = Model()
    x = m.input("x", [1, 4])
    m.node("Relu", [x], "one", outputs=["y"])
    m.node("Relu", [x], "two", outputs=["y"])
    m.output("y")
    return m


def case_huge_dims():
    m = Model()
    x = m.input("x", [1, 4])
    w = TensorProto(name="w", data_type=F, dims=[1 << 20, 1 << 21])
    m.inits.append(w)
    m.node("Gemm", [x, "w"], "fc", outputs=["y"])
    m.output("y")
    return m


def case_huge_input():
    m = Model()
    x = m.input("x", [1, 1 << 30, 1 << 30])
    m.node("Relu", [x], "r", outputs=["y"])
    m.output("y")
    return m


def case_layout_errors():
    """Ops Burst has, used in ways it does not: each error names its node."""
    m = Model()
    x = m.input("x", [1, 4, 6, 6])
    a = m.node("Conv", [x, m.init("w", [4, 4, 3, 3])], "asym", kernel_shape=[3, 3],
               pads=[0, 0, 1, 1])
    b = m.node("Add", [x, m.init("bias", [1, 4, 1, 1])], "add_learned")
    c = m.node("Transpose", [x], "moves_batch", perm=[1, 0, 2, 3])
    d = m.node("Softmax", [x], "over_batch", axis=0)
    e = m.node("Gather", [x, m.const([0, 2])], "pick", axis=1)
    m.node("Add", [x, m.node("GlobalAveragePool", [x], "gap")], "broadcast_add",
           outputs=["out"])
    for v in (a, b, c, d, e):
        m.outputs.append(helper.make_tensor_value_info(v, F, None))
    m.output("out")
    return m


def case_attention_no_bias():
    m = Model(14)
    x = m.input("x", [1, 6, 8])
    q = linear(m, x, 8, 8, "q", bias=False)
    k = linear(m, x, 8, 8, "k", bias=False)
    v = linear(m, x, 8, 8, "v", bias=False)
    shape = m.const([1, 6, 2, 4])
    q = m.node("Transpose", [m.node("Reshape", [q, shape], "rq")], "tq", perm=[0, 2, 1, 3])
    k = m.node("Transpose", [m.node("Reshape", [k, shape], "rk")], "tk", perm=[0, 2, 3, 1])
    v = m.node("Transpose", [m.node("Reshape", [v, shape], "rv")], "tv", perm=[0, 2, 1, 3])
    p = m.node("Softmax", [m.node("MatMul", [q, k], "scores")], "attn/Softmax", axis=-1)
    y = m.node("Reshape", [m.node("Transpose", [m.node("MatMul", [p, v], "mix")], "ty",
                                  perm=[0, 2, 1, 3]), m.const([1, 6, 8])], "ry")
    m.node("Identity", [linear(m, y, 8, 8, "o", bias=False)], "out", outputs=["out"])
    m.output("out")
    return m


def case_layernorm_no_bias():
    m = Model(17)
    x = m.input("x", [1, 4, 8])
    m.node("LayerNormalization", [x, m.init("w", [8])], "ln", outputs=["y"])
    m.output("y")
    return m


def case_constant_output():
    """The only output is computed from constants: nothing for Burst to train."""
    m = Model()
    m.input("x", [1, 4])
    m.node("Add", [m.const([1.0], F), m.const([2.0], F)], "sum", outputs=["y"])
    m.output("y")
    return m


def case_no_shape():
    m = Model()
    m.inputs.append(helper.make_tensor_value_info("x", F, None))
    m.node("Relu", ["x"], "r", outputs=["y"])
    m.output("y")
    return m


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}


def write_bytes(kind, path):
    """Files that are not models: returns True if kind was one of them."""
    good = CASES["cnn"]().model().SerializeToString()
    if kind == "truncated":
        data = good[:len(good) // 2]
    elif kind == "not_protobuf":
        data = b"# a text file, not an ONNX model\nx = relu(y)\n"
    elif kind == "length_claim":
        # ir_version = 8, then field 7 (graph) claiming 2,147,483,648 bytes; 100 bytes in all.
        data = b"\x08\x08" + b"\x3a" + b"\x80\x80\x80\x80\x08" + b"\x00" * 92
    elif kind == "empty":
        data = b""
    elif kind == "deep":
        # A graph whose node has an attribute holding a graph whose node ... 200 deep.
        g = helper.make_graph([], "leaf", [], [])
        for i in range(200):
            n = helper.make_node("If", [], [], name="n%d" % i)
            n.attribute.append(helper.make_attribute("then_branch", g))
            g = helper.make_graph([n], "g%d" % i, [], [])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
        data = m.SerializeToString()
    elif kind == "many_nodes":
        # 1,000,001 empty nodes: a 2 MB file past the node limit.
        node = b"\x0a\x00"
        graph = node * 1000001
        data = b"\x08\x08" + b"\x3a" + encode_varint(len(graph)) + graph + b"\x42\x02\x10\x0e"
    else:
        return False
    with open(path, "wb") as f:
        f.write(data)
    return True


def encode_varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "list":
        print("\n".join(sorted(CASES)))
    elif len(sys.argv) == 4 and sys.argv[1] == "make":
        if not write_bytes(sys.argv[2], sys.argv[3]):
            onnx.save(CASES[sys.argv[2]]().model(), sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "params":
        print("{:,} parameters".format(CASES[sys.argv[2]]().params))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
