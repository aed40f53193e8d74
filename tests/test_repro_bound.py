"""The float repro scripts judge as the harness does: by the error bound (stages/compare.py
ErrorBound, build.error_bound), computed inline with torch alone. The script's lines up to the
lowering, run on their own (no lowering, no harness import), give the same float64 reference
and the same per-element bound as ErrorBound for the case's own weights and inputs."""

import math

import pytest
import torch

from harness.results import repro
from harness.spec import ConvCase
from harness.stages.build import build_module, error_bound, make_inputs

BASE = dict(dim=2, in_channels=4, out_channels=6, kernel_size=3, input_shape=(1, 4, 6, 6))
CASES = {
    "fp16 depthwise": ConvCase(dim=2, in_channels=4, out_channels=4, groups=4, kernel_size=7,
                               padding=3, input_shape=(1, 4, 8, 8), dtype="float16"),
    "fp32": ConvCase(**BASE, padding=1),
    "bf16 conv1d": ConvCase(dim=1, in_channels=3, out_channels=5, kernel_size=4, stride=2,
                            input_shape=(2, 3, 11), dtype="bfloat16"),
    "fp16 transposed": ConvCase(dim=2, in_channels=4, out_channels=2, kernel_size=3, stride=2,
                                transposed=True, input_shape=(1, 4, 5, 5), dtype="float16"),
    "fp16 channels-last, batchnorm, add, relu6": ConvCase(
        **BASE, dtype="float16", memory_format="channels_last", module_channels_last=True,
        epilogue=("batchnorm", "add", "relu6")),
    "fp32 pad prologue, weights as inputs": ConvCase(
        **BASE, prologue=("pad", (1, 1, 2, 0), -0.75), weights="input", epilogue=("add",)),
    "bf16 no bias, clamp": ConvCase(**BASE, bias=False, dtype="bfloat16",
                                    epilogue=(("clamp", -1.0, 0.5),)),
}


def before_lowering(script: str) -> str:
    """The script from the model to the bound (what runs before anything is lowered)."""
    body = script[script.index("model = torch.nn."):]
    return body[:body.index("pte = ")]


@pytest.mark.parametrize("name", list(CASES))
def test_the_scripts_bound_is_the_harness_bound(name):
    case = CASES[name]
    script = repro.minimal_script(case, "xnnpack", "MISMATCH", "max|d|=1")
    assert "LOW_PRECISION" not in script and "1e-4" not in script and "finfo(torch." in script
    space = {"torch": torch, "copy": __import__("copy"), "math": math}
    exec(compile(before_lowering(script), "repro.py", "exec"), space)  # noqa: S102
    eb = error_bound(case, build_module(case), make_inputs(case))
    assert space["K"] == eb.terms
    torch.testing.assert_close(space["expected"], eb.exact, rtol=0, atol=0)
    torch.testing.assert_close(space["bound"], eb.allowed(), rtol=1e-12, atol=0)
    assert space["bound"].dtype == torch.float64 and space["bound"].shape == eb.exact.shape


def test_the_verdict_reads_the_bound_and_stays_short():
    """A float script prints 'Nx the bound' and counts NaN as wrong; a quantized one keeps its
    one output step; the drafts' length target holds."""
    fp16, quant = CASES["fp16 depthwise"], ConvCase(**BASE, padding=1, quant="int8_per_tensor")
    text = repro.minimal_script(fp16, "vulkan", "MISMATCH", "max|d|=1")
    assert "~(err <= bound)" in text and "x the bound" in text
    assert repro.code_lines(text) <= 30
    q = repro.minimal_script(quant, "xnnpack", "MISMATCH", "max|d|=1")
    assert "bound = step * (1 + 1e-5)" in q and "wide" not in q and repro.code_lines(q) <= 30
    for t in (text, q):
        compile(t, "repro.py", "exec")


@pytest.mark.parametrize("name", ["fp16 depthwise", "fp32 pad prologue, weights as inputs"])
def test_the_full_script_judges_by_the_same_bound(name):
    """The full repro (harness repro, bug reports' attachment): its lines before the lowering
    give ErrorBound's reference and bound too, and its verdict reads them."""
    case = CASES[name]
    script = repro.script(case, "xnnpack", "", "MISMATCH")
    assert "LOW_PRECISION" not in script and "x the bound" in script
    body = script[script.index("module = torch.nn."):]
    body = body[:body.index("out_scale = None")]
    space = {"torch": torch, "copy": __import__("copy"), "math": math}
    exec(compile(body, "repro.py", "exec"), space)  # noqa: S102
    eb = error_bound(case, build_module(case), make_inputs(case))
    torch.testing.assert_close(space["exact"], eb.exact, rtol=0, atol=0)
    torch.testing.assert_close(space["bound"], eb.allowed(), rtol=1e-12, atol=0)


def test_a_dynamic_scripts_every_size_is_judged_by_that_sizes_bound():
    """The full script's every-size loop computes each size's bound at that size's inputs
    (stages/sizes.py judges each size by error_bound of its own inputs)."""
    from harness.stages.build import size_inputs

    case = ConvCase(dim=2, in_channels=3, out_channels=4, kernel_size=3, padding=1,
                    input_shape=(1, 3, 8, 8), dtype="float16", dynamic="spatial",
                    dynamic_sizes=[(1, 3, 8, 8), (1, 3, 11, 9)])
    script = repro.script(case, "xnnpack", "", "PASS")
    assert "1e-4" not in script.split("for shape in")[1].split("status(*(worst")[0]
    lines = repro.bound_lines(case, model="module", inputs="xs", exact="ref")
    assert "    " + "\n    ".join(lines) in script  # the loop's own lines
    module = build_module(case)
    for shape in case.dynamic_sizes:
        xs = size_inputs(case, shape)
        space = {"torch": torch, "copy": __import__("copy"), "math": math, "module": module,
                 "xs": xs}
        exec(compile("\n".join(lines), "repro.py", "exec"), space)  # noqa: S102
        eb = error_bound(case, module, xs)
        torch.testing.assert_close(space["ref"], eb.exact, rtol=0, atol=0)
        torch.testing.assert_close(space["bound"], eb.allowed(), rtol=1e-12, atol=0)


def test_a_case_eager_cannot_build_still_gets_a_script():
    """An INVALID cell's case (eager refuses it) has no bound to compute: its scripts render
    and compile, the full one stating the eager error when it runs."""
    case = ConvCase(dim=2, in_channels=2, out_channels=2, kernel_size=5, input_shape=(1, 2, 3, 3))
    assert repro.bound_lines(case) is None
    for text in (repro.script(case, "xnnpack", "", "INVALID"),
                 repro.minimal_script(case, "xnnpack", "MISMATCH", "max|d|=1")):
        compile(text, "repro.py", "exec")


@pytest.mark.slow
def test_a_float_script_alone_states_the_cells_status(tmp_path):
    """Run the harness on an fp16 and an fp32 cell (XNNPACK: no plug-in needed), then each
    cell's minimal script alone in a fresh process (no convconf on its path): the status it
    prints is the cell's, whatever that is (a delegate bug is the corpus', not this test's)."""
    import json
    import os
    import subprocess
    import sys

    import pandas as pd

    cases = [CASES["fp16 depthwise"], CASES["fp32"]]
    (tmp_path / "cases.json").write_text(json.dumps([c.to_dict() for c in cases]))
    run = subprocess.run([sys.executable, "-m", "harness", "run", "--cases",
                          str(tmp_path / "cases.json"), "--max-examples", "0", "--backends",
                          "xnnpack", "-j", "1", "--out", str(tmp_path / "run"), "--no-report"],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    matrix = pd.read_csv(tmp_path / "run" / "matrix.csv")
    by_id = {c.case_id: c for c in cases}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    said = {}
    for row in matrix.itertuples():
        script = tmp_path / f"{row.case_id}.py"
        script.write_text(repro.minimal_script(by_id[row.case_id], "xnnpack", row.status, ""))
        proc = subprocess.run([sys.executable, "-I", str(script)], capture_output=True,
                              text=True, timeout=600, cwd=tmp_path, env=env)
        said[row.case_id] = [ln.split()[1] for ln in proc.stdout.splitlines()
                             if ln.startswith("STATUS:")]
    assert said == {r.case_id: [r.status] for r in matrix.itertuples()}
    assert len(said) == 2
