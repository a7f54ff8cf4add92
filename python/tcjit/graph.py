"""tcjit.Graph: the traced graph as custom backends and tests see it.

Calling a Graph runs it op by op through torch (backend="eager"): the
reference the compiled kernels are checked against.
"""
import operator

import torch
import torch.nn.functional as F

# Registry op name -> how eager PyTorch computes it.  Operators (not
# torch.add) so a Python number may be either operand, as in the source.
_EAGER = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "div": operator.truediv, "pow": operator.pow, "neg": operator.neg,
    "lt": operator.lt, "le": operator.le, "gt": operator.gt,
    "ge": operator.ge, "eq": operator.eq, "ne": operator.ne,
    "bitwise_and": operator.and_, "bitwise_or": operator.or_,
    "bitwise_xor": operator.xor, "bitwise_not": operator.invert,
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "softplus": F.softplus, "leaky_relu": F.leaky_relu, "elu": F.elu,
    "mish": F.mish, "contiguous": lambda x: x.contiguous(),
}


def _new_tensor(n, env):
    """Creation ops: the node's own shape, strides and dtype."""
    out = torch.empty_strided(n.shape, n.stride, dtype=n.to_dtype)
    args = [env[a.index] for a in n.args]
    if n.op == "full":
        return out.fill_(args[0])
    pos = torch.arange(out.numel(), dtype=torch.float64
                       if n.to_dtype.is_floating_point else torch.int64)
    return out.copy_((args[0] + args[1] * pos).view(n.shape))


def _torch_fn(name):
    fn = _EAGER.get(name) or getattr(torch, name, None)
    if fn is None:
        raise NotImplementedError(f"no eager implementation for op {name!r}")
    return fn


class Node:
    """One node: an input, a Python scalar, or an op with its args."""

    def __init__(self, index, d, nodes):
        self.index = index
        self.kind = d["kind"]
        self.op = d["op"] or d["kind"]
        self.dtype = getattr(torch, d["dtype"])
        self.shape = torch.Size(d["shape"])
        self.stride = tuple(d["stride"])
        self.value = d["value"]
        self.input_index = d["input_index"]
        self.to_dtype = getattr(torch, d["to_dtype"])
        self.args = tuple(nodes[i] for i in d["inputs"])

    @property
    def name(self):
        return f"%x{self.input_index}" if self.kind == "input" else f"%{self.index}"

    def __repr__(self):
        if self.kind == "scalar":
            return repr(self.value)
        if self.kind == "input":
            return f"{self.name}: input[{self.input_index}]"
        args = ", ".join(a.name if a.kind != "scalar" else repr(a.value)
                         for a in self.args)
        return f"{self.name} = {self.op}({args})"


class Graph:
    """A traced graph: ``nodes``, ``inputs``, ``outputs``, ``op_count``;
    ``str(graph)`` prints it; ``graph(*inputs)`` runs it eagerly."""

    def __init__(self, desc, text=""):
        nodes = []
        for i, d in enumerate(desc["nodes"]):
            nodes.append(Node(i, d, nodes))
        self.nodes = nodes
        self.inputs = sorted((n for n in nodes if n.kind == "input"),
                             key=lambda n: n.input_index)
        self.outputs = [nodes[i] for i in desc["outputs"]]
        self._text = text

    @property
    def op_count(self):
        return sum(1 for n in self.nodes if n.kind == "op")

    def ops(self):
        return [n.op for n in self.nodes if n.kind == "op"]

    def __str__(self):
        return self._text or "\n".join(map(repr, self.nodes))

    def __repr__(self):
        return f"<tcjit.Graph {self.op_count} ops: {', '.join(self.ops())}>"

    def __call__(self, *inputs):
        # Graphs have no autograd: an input that requires grad is only
        # ever read under no_grad, and no result requires grad.
        with torch.no_grad():
            return self._run(inputs)

    def _run(self, inputs):
        env = {}
        for n in self.nodes:
            if n.kind == "input":
                env[n.index] = inputs[n.input_index]
            elif n.kind == "scalar":
                env[n.index] = n.value
            elif n.op == "to":
                env[n.index] = env[n.args[0].index].to(n.to_dtype)
            elif n.op in ("full", "arange"):
                env[n.index] = _new_tensor(n, env)
            else:
                env[n.index] = _torch_fn(n.op)(*(env[a.index] for a in n.args))
        return tuple(env[o.index] for o in self.outputs)
