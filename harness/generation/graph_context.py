"""The conv in its model: what the exported graph does right before and after each conv call.

``cases from-model`` hooks every conv for its arguments; this module exports the same model once
(``torch.export``, non-strict) and reads, for each conv node, the context a ConvCase can carry:

- ``prologue``: an explicit constant pad (``F.pad``, ``nn.ZeroPad2d``) whose output the conv
  reads (a pad inside the conv module itself is its ``padding_mode``, not a prologue);
- ``epilogue``: the chain of ops that consumes the conv's output, one single user after
  another, as far as the ConvCase vocabulary goes (``spec.EPILOGUE_OPS``/``BOUNDED_OPS``):
  batchnorm (eval), relu, relu6 (exported as hardtanh(0, 6)), hardtanh, clamp, and add with a
  tensor of the output's own shape (a residual); dropout in eval is the identity it is;
- ``rest``: what the chain runs into that the vocabulary cannot say (``silu``,
  ``permute -> layer_norm``, ``gelu``, ...), named so the case's source can say it. The next layer
  (another conv, a linear, a pool, a concatenation, the graph's output) ends a chain without a
  note: it is not the conv's context (a pad there is the next conv's prologue).

Conv nodes are matched to the hooks' calls by module path and call order (the export runs the
same forward), so a module called twice in two contexts gives two contexts.
"""

from __future__ import annotations

from dataclasses import dataclass

# Layout ops walked through (and named) when naming what an epilogue runs into.
LAYOUT_OPS = {"view", "reshape", "_unsafe_view", "permute", "transpose", "flatten", "unsqueeze",
              "squeeze", "contiguous", "clone", "slice", "expand"}
# Ops that start the next layer: a chain ending there needs no note.
NEXT_LAYER_OPS = {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d", "convolution", "linear", "matmul", "mm", "addmm", "bmm",
                  "max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices",
                  "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
                  "adaptive_avg_pool2d", "adaptive_avg_pool3d", "mean", "cat", "stack",
                  "split", "split_with_sizes", "chunk", "unbind",
                  "pad", "constant_pad_nd"}  # a pad: the next conv's prologue
IDENTITY_OPS = {"dropout", "alias", "detach"}
CONV_OPS = {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
            "conv_transpose3d", "convolution"}
MAX_LAYOUT_STEPS = 4


@dataclass(frozen=True)
class ConvContext:
    """One conv call's context in the exported graph."""
    prologue: tuple | None = None  # ("pad", pads, value), as ConvCase spells it
    epilogue: tuple = ()           # ConvCase epilogue ops
    rest: str = ""                 # what follows that a case cannot express ("" when nothing)


def op_name(node) -> str:
    """'aten.relu.default' -> 'relu' (an in-place op's trailing underscore dropped)."""
    if node.op != "call_function":
        return node.op
    target = getattr(node.target, "_opname", None) or getattr(node.target, "__name__", "")
    name = str(target).split(".")[0]
    return name[:-1] if name.endswith("_") and not name.startswith("_") else name


def module_path(node) -> str | None:
    """The innermost module a node was traced in (nn_module_stack), '' for the root."""
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return None
    path = list(stack.values())[-1][0]
    return path.split("@")[0]


def shape_of(node) -> tuple | None:
    val = node.meta.get("val") if hasattr(node, "meta") else None
    return tuple(val.shape) if hasattr(val, "shape") else None


def contexts(model, args: tuple, kwargs: dict) -> dict[str, list[ConvContext]]:
    """{module path: [ConvContext per call, in call order]} from one non-strict export; raises
    whatever torch.export raises."""
    import torch

    with torch.no_grad():
        program = torch.export.export(model, args, kwargs, strict=False)
    found: dict[str, list[ConvContext]] = {}
    for node in program.graph.nodes:
        if node.op == "call_function" and op_name(node) in CONV_OPS:
            path = module_path(node)
            if path is not None:
                found.setdefault(path or "<root>", []).append(context_of(node))
    return found


def context_of(conv) -> ConvContext:
    prologue = prologue_of(conv)
    epilogue, rest = epilogue_of(conv)
    return ConvContext(prologue=prologue, epilogue=epilogue, rest=rest)


def prologue_of(conv):
    """("pad", pads, value) when the conv's input is a constant pad traced outside the conv
    module (inside it, the pad is the module's padding_mode); None otherwise."""
    pad = conv.args[0] if conv.args else None
    if pad is None or getattr(pad, "op", None) != "call_function":
        return None
    name = op_name(pad)
    if name == "constant_pad_nd":
        pads, value = pad.args[1], pad.args[2] if len(pad.args) > 2 else pad.kwargs.get("value", 0)
    elif name == "pad":
        mode = pad.args[2] if len(pad.args) > 2 else pad.kwargs.get("mode", "constant")
        if mode != "constant":
            return None
        pads = pad.args[1]
        value = pad.args[3] if len(pad.args) > 3 else pad.kwargs.get("value")
    else:
        return None
    if module_path(pad) == module_path(conv):
        return None  # the conv module's own padding_mode pad
    value = 0.0 if value is None else float(value)
    return ("pad", tuple(int(p) for p in pads), value)


def epilogue_of(conv) -> tuple[tuple, str]:
    """(the ConvCase epilogue ops consuming the conv's output, what the chain runs into that no
    case op expresses)."""
    ops: list = []
    node = conv
    out_shape = shape_of(conv)
    while True:
        users = list(node.users)
        if len(users) != 1:
            return tuple(ops), ""  # used twice (or not at all): the chain ends here
        user = users[0]
        name = op_name(user)
        if name in IDENTITY_OPS and user.args and user.args[0] is node:
            node = user
            continue
        op = epilogue_op(user, node, out_shape)
        if op is None:
            return tuple(ops), rest_of(node)
        ops.append(op)
        node = following_output(user)


def following_output(node):
    """The node carrying an op's tensor result (a batch norm's getitem 0 when it returns a
    tuple)."""
    if op_name(node) in ("_native_batch_norm_legit_no_training", "native_batch_norm"):
        for user in node.users:
            if op_name(user) == "getitem" or "getitem" in str(user.target):
                if user.args[1] == 0:
                    return user
    return node


def epilogue_op(user, node, out_shape):
    """The ConvCase epilogue op ``user`` applies to ``node`` (the chain so far), else None."""
    name = op_name(user)
    args = list(user.args)
    if not args or args[0] is not node and name != "add":
        return None
    if name in ("batch_norm", "_native_batch_norm_legit_no_training"):
        training = args[5] if name == "batch_norm" and len(args) > 5 else False
        return None if training else "batchnorm"
    if name == "relu":
        return "relu"
    if name == "hardtanh":
        low = float(args[1]) if len(args) > 1 else float(user.kwargs.get("min_val", -1.0))
        high = float(args[2]) if len(args) > 2 else float(user.kwargs.get("max_val", 1.0))
        if (low, high) == (0.0, 6.0):
            return "relu6"
        return ("hardtanh", low, high) if low < high else None
    if name in ("clamp", "clamp_min", "clamp_max"):
        if name == "clamp":
            low = args[1] if len(args) > 1 else user.kwargs.get("min")
            high = args[2] if len(args) > 2 else user.kwargs.get("max")
        else:
            bound = args[1] if len(args) > 1 else None
            low, high = (bound, None) if name == "clamp_min" else (None, bound)
        if not all(v is None or isinstance(v, (int, float)) for v in (low, high)):
            return None  # a tensor bound
        if low is None and high is None:
            return None
        return ("clamp", None if low is None else float(low), None if high is None else float(high))
    if name == "add":
        if len(args) != 2 or user.kwargs.get("alpha", 1) != 1:
            return None
        other = args[1] if args[0] is node else args[0]
        if other is node or not hasattr(other, "meta") or shape_of(other) != out_shape:
            return None  # not a residual of the output's shape (a bias, a broadcast)
        return "add"
    return None


def rest_of(node) -> str:
    """The ops after ``node`` (through layout ops) up to the first that computes, when that one
    is not the next layer: 'silu', 'permute -> layer_norm'; '' otherwise."""
    names = []
    for _ in range(MAX_LAYOUT_STEPS + 1):
        users = list(node.users)
        if len(users) != 1:
            return ""
        node = users[0]
        name = op_name(node)
        if node.op == "output" or name in NEXT_LAYER_OPS:
            return ""
        names.append(name)
        if name not in LAYOUT_OPS:
            return " -> ".join(names)
    return ""
