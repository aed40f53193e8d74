"""Name the culprit of a cell that is not PASS: which component failed, and the runtime's own
decisive line.

``component(...)`` reads what a cell left behind (status, stage, message, the lowering's
traceback, what the runtime printed, the shaders or XNNPACK nodes it reached, what stayed outside
the delegate) and says where it failed:

    lowering:<pass or stage>     a pass (FuseBatchNormPass, FusePatternsPass, ...) or the
                                 delegate's preprocess raised during to_edge_transform_and_lower
    quantizer                    prepare/calibrate/convert (pt2e) raised or annotated nothing
    partitioner                  the partitioner raised, or left the conv outside (NOT_DELEGATED)
    to_executorch                exir's serialization stage (out variants, memory planning, emit)
    delegate:vulkan:<impl/shader>  the Vulkan delegate: its op impl (Convolution.cpp, ...), the
                                 shader it asked for, or for a MISMATCH the conv shader(s) it ran
    delegate:xnnpack:<node>      the XNNPACK delegate: the node type (XNNConv2d, ...)
    portable:<operator>          an ExecuTorch kernel outside any delegate
                                 (``KernelCall failed ... in operator aten::convolution.out``)
    runtime:pybindings           ExecuTorch's Python binding refused an input before any kernel
                                 ran: extension/pybindings/pybindings.cpp takes contiguous or
                                 4-D channels-last tensors only (a channels_last_3d input)
    harness                      our own setup (e.g. the quantized out-variant library not loaded)
    eager                        PyTorch itself rejects the configuration (INVALID)

A component that every lane runs the same code of (``shared``: portable kernels, exir passes and
stages, the quantizer, export) makes one finding across lanes (results/findings.py).

``decisive(log)`` picks from the runtime's output the lines that say why (the innermost failed
check, the operator or delegate call that failed, an abort's assert, an uncaught exception);
``explain(message, log)`` puts them into a cell's message, so the message never stops at a bare
"error 0x12" when the runtime printed a reason.
"""

from __future__ import annotations

import re

from harness.status import Status

# --- the runtime's output ----------------------------------------------------------------------
_CHECK = re.compile(r"Check failed \(|assert failed \(|Exception raised from |Missing operator|"
                    r"Could not find ShaderInfo|not supported|is not registered|Missing operator")
_KERNEL_CALL = re.compile(r"KernelCall failed at instruction [\d:]+ in operator ([\w:.]+?):? 0x")
_DELEGATE_CALL = re.compile(r"CALL_DELEGATE execute failed at instruction")
_XNN = re.compile(r"xnn_status_\w+|XNN\w*\.cpp")
_ABORT = re.compile(r"terminate called|what\(\):|Aborted|Segmentation fault")
_WHERE = re.compile(r"^\[([\w.]+):(\d+)\]\s*")  # ET_LOG's "[file.cpp:123] " prefix
_IN_FUNCTION = re.compile(r"In function (\w+)\(\)")
# extension/pybindings/pybindings.cpp (main cff6f4dd32, line 806): an input whose dim order is
# neither contiguous nor 4-D channels-last is refused before the method runs
_BINDING_INPUT = re.compile(r"Input \d+ for method \w+ should be contiguous or channels-last")
_ERROR_CODE = re.compile(r"error:? 0x[0-9a-fA-F]+|0x[0-9a-fA-F]+$")

LOG_TAIL_LINES = 20
LOG_TAIL_CHARS = 3000


def tail(log: str, lines: int = LOG_TAIL_LINES, chars: int = LOG_TAIL_CHARS) -> str:
    """The last lines of a runtime log (a matrix column: short)."""
    kept = [ln for ln in (log or "").splitlines() if ln.strip()][-lines:]
    return "\n".join(kept)[-chars:]


def decisive(log: str) -> list[str]:
    """The lines of a runtime log that say why it failed, in this order: the first (innermost)
    failed check or assert, the XNNPACK status line, the failed kernel or delegate call, an
    abort's own words. Each at most once, ``[file:line]`` prefixes kept (they name the code)."""
    lines = [ln.strip() for ln in (log or "").splitlines() if ln.strip()]
    picked: list[str] = []

    def first(pattern: re.Pattern) -> None:
        hit = next((ln for ln in lines if pattern.search(ln)), None)
        if hit and hit not in picked:
            picked.append(hit[:400])

    first(_CHECK)
    first(_XNN)
    first(_KERNEL_CALL)
    first(_DELEGATE_CALL)
    first(_ABORT)
    return picked


def explain(message: str, log: str) -> str:
    """A runtime failure's message with the runtime's decisive lines, where it printed any that
    the message does not already say: ``<message> — runtime: <line> | <line>``."""
    said = [ln for ln in decisive(log) if _WHERE.sub("", ln)[:80] not in (message or "")]
    if not said:
        return message
    return f"{message} — runtime: {' | '.join(said)}"


_MISSING_KERNEL = re.compile(r"\[method\.cpp:\d+\] Missing operator: \[\d+\] ([\w:.]+)")


def failed_operator(log: str) -> str | None:
    """The operator of ``KernelCall failed ... in operator OP`` (a kernel outside any delegate),
    or of ``[method.cpp] Missing operator: [i] OP`` (the runtime has no kernel for it)."""
    m = _KERNEL_CALL.search(log or "") or _MISSING_KERNEL.search(log or "")
    return m.group(1) if m else None


# --- the component -----------------------------------------------------------------------------
SHARED_PREFIXES = ("portable:", "runtime:", "quantizer", "to_executorch", "harness", "eager", "export")
# Lowering passes more than one lane runs, the same code: exir's and backends/transforms' that
# both delegates' preprocess use, and XNNPACK's FuseBatchNormPass, which the Vulkan preprocess
# imports (backends/vulkan/vulkan_preprocess.py). A pass of one backend's own (FusePatternsPass,
# Conv1dUnsqueezePass, ...) keeps its finding per backend.
SHARED_PASSES = {"FuseBatchNormPass", "MemoryPlanningPass", "SpecPropPass", "ConstPropPass",
                 "DimOrderOpsRevertPass", "ConstraintBasedSymShapeEvalPass",
                 "RemoveGetItemPass", "RemoveCloneOpsTransform", "ToOutVarPass"}


def shared(component: str) -> bool:
    """Whether every lane runs the same code of ``component`` (one finding across lanes)."""
    if component.startswith("lowering:"):
        return component.split(":", 1)[1] in SHARED_PASSES
    return bool(component) and component.startswith(SHARED_PREFIXES)


_PASS = re.compile(r"running the '(\w+)' pass")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\w+)')


def _lowering_named(message: str) -> str:
    """The component a lowering error's message itself names ("" when it names none): our
    own setup, the pass ExecuTorch's pass manager was running, to_executorch's out-variant
    check, the quantizer."""
    if "SetupError" in message:
        return "harness"
    m = _PASS.search(message)
    if m:
        return f"lowering:{m.group(1)}"
    if "Missing out variants" in message:
        return "to_executorch"
    if "annotated no op" in message or "QuantUnsupported" in message:
        return "quantizer"
    return ""


def lowering_component(phase: str | None, message: str, traceback: str = "") -> str:
    """Where a LOWER_ERROR came from: the pass named by ExecuTorch's pass manager, else the
    innermost ExecuTorch frame of the traceback (partitioner, preprocess, to_executorch)."""
    message = message or ""
    if phase == "quantize":
        return "quantizer"
    if phase == "export":
        return "export"
    named = _lowering_named(message)
    if named:
        return named
    frames = _FRAME.findall(traceback or "")
    for path, _, func in reversed(frames):  # innermost first
        p = path.replace("\\", "/")
        if "/executorch/" not in p and "executorch/" not in p:
            continue
        rel = p.split("executorch/", 1)[-1]
        if "/partition" in rel or rel.endswith("op_registry.py") or "partitioner" in func:
            return "partitioner"
        if "preprocess" in rel or func == "preprocess":
            return "lowering:preprocess"
        if rel.startswith("exir/") and func in ("to_executorch", "emit_program", "_emit"):
            return "to_executorch"
        if "/_passes/" in rel or "/passes/" in rel or "/patterns/" in rel:
            return "lowering:" + rel.rsplit("/", 1)[-1].removesuffix(".py")
        if rel.startswith("exir/") and ("to_executorch" in func or "emit" in rel):
            return "to_executorch"
    for path, _, func in frames:  # outermost: which stage of ours was running
        if func in ("to_executorch",):
            return "to_executorch"
    if "partition" in message.lower():
        return "partitioner"
    return "lowering"


def _outside_delegates(text: str) -> str:
    """A failure in code every lane runs, read from what the runtime said: the Python binding's
    input refusal, a failed kernel call's operator, or a portable kernel that aborted before it
    could return an error; "" when the text names none of them."""
    if _BINDING_INPUT.search(text):
        return "runtime:pybindings"
    operator = failed_operator(text)
    if operator:
        return f"portable:{operator}"
    abort = _IN_FUNCTION.search(text)
    if abort and re.search(r"\bop_\w+\.cpp", text) and not re.search(r"Vulkan|XNN", text):
        m = re.match(r"((?:de)?quantize_per_(?:channel|tensor|token)\w*?)_out$", abort.group(1))
        return (f"portable:quantized_decomposed::{m.group(1)}.out" if m
                else f"portable:{abort.group(1)}")
    return ""


def _vulkan_runtime(message: str, log: str, delegated_ops: dict) -> str:
    """The Vulkan delegate's part that failed: the shader it asked for, the op impl whose check
    failed (``Convolution.cpp``), a utility named with its function (``VecUtils.h:make_ivec2``),
    the backend itself (``VulkanBackend.cpp``: e.g. a missing operator), else the conv op."""
    text = f"{message}\n{log}"
    shader = re.search(r"ShaderInfo with name (\w+)", text)
    if shader:
        return f"delegate:vulkan:{shader.group(1)}"
    m = re.search(r"Exception raised from (\w+) at [\w./-]*?([\w.]+\.(?:cpp|h)):\d+", text)
    if m:
        func, where = m.groups()
        return (f"delegate:vulkan:{where}" if "/impl/" in text and where.endswith(".cpp")
                else f"delegate:vulkan:{where}:{func}")
    m = re.search(r"\[(\w+\.cpp):\d+\][^\n]*(?:assert failed|Check failed)", text)
    if m:
        return f"delegate:vulkan:{m.group(1)}"
    conv = sorted(op for op in delegated_ops or {} if "conv" in op)
    return "delegate:vulkan" + (f":{conv[0]}" if conv else "")


def _xnnpack_nodes(paths) -> list[str]:
    return sorted({p.split(":", 1)[0] for p in paths or () if p.startswith("XNN")})


def _vulkan_shaders(reached) -> list[str]:
    """The conv compute shaders a Vulkan cell dispatched (weight prepacking and layout
    transfers left out: they run for every conv)."""
    return sorted({s for s in reached or () if "conv" in s and "prepack" not in s})


def component(*, status: str | None, backend: str, phase: str | None = None, message: str = "",
              traceback: str = "", log: str = "", reached=(), code_path=(),
              delegated_ops: dict | None = None, undelegated_ops: dict | None = None,
              contract_violations=()) -> str:
    """The culprit of a cell (see the module doc); "" for PASS."""
    family = backend.split("@")[0].split("+")[0]
    message, log = message or "", log or ""
    undelegated_ops, delegated_ops = undelegated_ops or {}, delegated_ops or {}
    conv_outside = any("convolution" in op for op in undelegated_ops)
    if status in (None, "", Status.PASS):
        return ""
    if status == Status.INVALID:
        return "eager"
    if status == Status.NO_RUNTIME:
        return "harness"
    if status == Status.LOWER_ERROR:
        return lowering_component(phase, message, traceback)
    if status == Status.NOT_DELEGATED:
        return "partitioner"
    if status == Status.CONTRACT_VIOLATION:
        rules = re.findall(r"\[([a-z][a-z0-9-]*)\]", message)
        return f"delegate:{family}" + (f":contract[{rules[0]}]" if rules else "")
    outside = _outside_delegates(f"{message}\n{log}")
    if outside:
        return outside
    if status == Status.MISMATCH:
        if family == "vulkan":
            shaders = _vulkan_shaders(reached)
            if shaders:
                return "delegate:vulkan:" + "+".join(shaders)
        if family == "xnnpack":
            nodes = _xnnpack_nodes(list(reached or ()) + list(code_path or ()))
            if nodes:
                return "delegate:xnnpack:" + "+".join(nodes)
        return "portable:aten::convolution.out" if conv_outside else f"delegate:{family}"
    # RUNTIME_ERROR / CRASH inside a delegate
    if family == "vulkan":
        return _vulkan_runtime(message, log, delegated_ops)
    if family == "xnnpack":
        nodes = _xnnpack_nodes(code_path)
        return "delegate:xnnpack" + (f":{'+'.join(nodes)}" if nodes else "")
    return f"delegate:{family}"


def check_line(message: str, log: str = "") -> str:
    """The failed check that decides a runtime failure, without its ``[file:line]`` prefix's
    line number: the finding's signature keys on it (with numbers taken out there)."""
    for ln in decisive(f"{log}\n{message}"):
        if _CHECK.search(ln):
            m = _WHERE.match(ln)
            body = _WHERE.sub("", ln)
            return f"{m.group(1)}: {body}" if m else body
    return ""


# --- what a finding keys on (results/findings.py) ---------------------------------------------
CULPRIT_MARK = " — culprit: "
RUNTIME_MARK = " — runtime: "


def with_culprit(message: str, component: str) -> str:
    """A MISMATCH's message naming the code that computed the wrong output (the conv shader(s)
    a Vulkan cell dispatched, the XNNPACK node, or the portable kernel)."""
    if not component or CULPRIT_MARK in (message or ""):
        return message
    return f"{message}{CULPRIT_MARK}{component}"


def key_component(status: str, message: str) -> str:
    """The component a finding keys on, read from the cell's message alone (so every caller
    that has a cell's status and message, a shrinker's try included, computes the same key):
    the culprit a MISMATCH message names, the operator of a failed kernel call or the portable
    kernel that aborted, the pass or stage of a lowering error. "" when the message names none
    (then the key is what it always was)."""
    message = message or ""
    if status == Status.MISMATCH:
        return message.split(CULPRIT_MARK, 1)[1].strip() if CULPRIT_MARK in message else ""
    if status in (Status.RUNTIME_ERROR, Status.CRASH):
        return _outside_delegates(message)
    if status == Status.LOWER_ERROR:
        return _lowering_named(message)
    return ""


def failed_check(message: str) -> str:
    """The runtime's failed check (or abort assert) a message carries, ``[file:line]`` prefix
    read as ``file``: what a portable-kernel finding keys on beside its operator."""
    text = message.split(RUNTIME_MARK, 1)[1] if RUNTIME_MARK in message else message
    for part in re.split(r" \| ", text):
        if _CHECK.search(part):
            m = _WHERE.match(part.strip())
            return f"{m.group(1)}: {_WHERE.sub('', part.strip())}" if m else part.strip()
    return ""
