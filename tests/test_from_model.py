"""`harness cases from-model`: the convs a model runs, exactly as spelled, de-duplicated, with
their source carried into the matrix and the report."""

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.stages import build
from harness.cli import main
from harness.generation.from_model import case_in_context, case_sources, shrink
from harness.generation.graph_context import ConvContext
from harness.spec import FIELDS, ConvCase, load_cases
from honest import assert_executed

REPO = Path(__file__).resolve().parent.parent

TINY = textwrap.dedent('''
    import torch
    import torch.nn.functional as F
    from torch import nn

    NOT_CALLABLE = 3

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding="same")
            self.body = nn.Sequential(nn.Conv2d(8, 8, 3, padding="same"),
                                      nn.Conv2d(8, 8, 3, padding="same"))  # one case, two paths
            self.patch = nn.Conv2d(8, 16, 4, stride=4, padding="valid", bias=False)
            self.up = nn.ConvTranspose2d(16, 4, 2, stride=2)
            self.refl = nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect")
            self.temporal = nn.Conv1d(4, 4, 5, padding=2, groups=4)

        def forward(self, x):
            x = self.patch(self.body(self.stem(x)))
            x = self.refl(self.up(x))
            n, c, h, w = x.shape
            t = x.reshape(n, c, h * w)
            return self.temporal(self.temporal(t))  # called twice: one path

    def tiny():
        return Tiny()

    def not_a_module():
        return "model"

    def double():
        return nn.Conv2d(2, 2, 3).double()

    def double_input():
        return torch.zeros(1, 2, 8, 8, dtype=torch.float64)

    class Block(nn.Module):  # ResNet's: conv -> bn -> relu, conv -> bn -> + x -> relu
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
            self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(y)) + x)

    class Ctx(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.bn = nn.Conv2d(3, 8, 3, stride=2), nn.BatchNorm2d(8)
            self.act = nn.ReLU6()  # MobileNet's, exported as hardtanh(0, 6)
            self.b1, self.b2 = Block(), Block()  # the same convs in the same context: one case
            self.dw = nn.Conv2d(8, 8, 7, padding=3, groups=8)
            self.ln = nn.LayerNorm(8)  # ConvNeXt's: depthwise -> permute -> layer_norm
            self.se = nn.Conv2d(8, 8, 1)
            self.refl = nn.Conv2d(8, 8, 3, padding=1, padding_mode="reflect")

        def forward(self, x):
            x = self.act(self.bn(self.stem(F.pad(x, (0, 1, 0, 1)))))  # TF-style explicit pad
            x = self.b2(self.b1(x))
            x = self.ln(self.dw(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
            x = F.silu(self.se(x))
            x = torch.clamp(self.se(x), min=-1.0)  # the same conv again, another context
            return self.refl(x)

    def ctx():
        return Ctx()

    class Branchy(nn.Module):  # data-dependent control flow: runs eagerly, does not export
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 2, 3)

        def forward(self, x):
            y = self.conv(x)
            return torch.relu(y) if y.sum() > 0 else y

    def branchy():
        return Branchy()
''')


@pytest.fixture
def models(tmp_path, monkeypatch):
    (tmp_path / "tinymods.py").write_text(TINY)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def from_model(*args):
    try:
        return main(["cases", "from-model", *map(str, args)])
    finally:
        logging.disable(logging.NOTSET)  # main() quiets logging for the CLI: not for other tests


def expected_tiny(size=16):
    quarter = size // 4
    cases = [
        (ConvCase(dim=2, in_channels=3, out_channels=8, kernel_size=(3, 3), stride=(1, 1),
                  padding="same", dilation=(1, 1), input_shape=(1, 3, size, size)), ["stem"]),
        (ConvCase(dim=2, in_channels=8, out_channels=8, kernel_size=(3, 3), stride=(1, 1),
                  padding="same", dilation=(1, 1), input_shape=(1, 8, size, size)),
         ["body.0", "body.1"]),
        (ConvCase(dim=2, in_channels=8, out_channels=16, kernel_size=(4, 4), stride=(4, 4),
                  padding="valid", dilation=(1, 1), bias=False, input_shape=(1, 8, size, size)),
         ["patch"]),
        # nn.Conv*(padding=0) stores (0, 0): the tuple is what the op gets, so the case says it
        (ConvCase(dim=2, transposed=True, in_channels=16, out_channels=4, kernel_size=(2, 2),
                  stride=(2, 2), padding=(0, 0), dilation=(1, 1),
                  input_shape=(1, 16, quarter, quarter)), ["up"]),
    ]
    if "padding_mode" in FIELDS:
        cases.append((ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=(3, 3),
                               stride=(1, 1), padding=(1, 1), dilation=(1, 1),
                               padding_mode="reflect", input_shape=(1, 4, size // 2, size // 2)),
                      ["refl"]))
    cases.append((ConvCase(dim=1, in_channels=4, out_channels=4, kernel_size=(5,), stride=(1,),
                           padding=(2,), dilation=(1,), groups=4,
                           input_shape=(1, 4, (size // 2) ** 2)), ["temporal"]))
    return cases


def test_records_every_conv_as_spelled_deduplicated_with_source(models, tmp_path, capsys):
    out = tmp_path / "tiny.json"
    assert from_model("tinymods:tiny", "--input-shape", "1,3,16,16", "--out", out) == 0
    entries = json.loads(out.read_text())
    want = expected_tiny()
    assert [ConvCase.from_dict(e["case"]) for e in entries] == [c for c, _ in want]
    assert [e["modules"] for e in entries] == [paths for _, paths in want]
    assert entries[1]["source"] == "tinymods:tiny @ body.0, body.1"
    assert all("original_input_shapes" not in e for e in entries)  # the real shapes, kept
    assert load_cases(str(out)) == [c for c, _ in want]  # what `run --cases` reads
    said = capsys.readouterr()
    if "padding_mode" in FIELDS:
        assert f"{len(want)} distinct conv case(s) from 8 conv call(s)" in said.out
    else:  # a ConvCase without padding_mode: that conv is skipped, named, and counted
        assert "convconf: skipped refl: unknown field(s) 'padding_mode'" in said.err
        assert "1 skipped" in said.out


def test_a_conv_the_case_cannot_spell_is_skipped_by_name(models, tmp_path, capsys):
    out = tmp_path / "double.json"
    assert from_model("tinymods:double", "--input-factory", "tinymods:double_input",
                      "--out", out) == 0
    said = capsys.readouterr()
    assert "convconf: skipped <root>: field 'dtype'" in said.err
    assert "0 distinct conv case(s) from 1 conv call(s), 1 skipped" in said.out
    assert json.loads(out.read_text()) == []


def test_max_spatial_shrinks_keeping_arguments_and_says_so(models, tmp_path):
    out = tmp_path / "small.json"
    assert from_model("tinymods:tiny", "--input-shape", "1,3,64,64", "--max-spatial", 6,
                      "--out", out) == 0
    entries = json.loads(out.read_text())
    real = {paths[0]: c for c, paths in expected_tiny(64)}
    assert [e["modules"][0] for e in entries] == list(real)
    for entry in entries:
        case, original = ConvCase.from_dict(entry["case"]), real[entry["modules"][0]]
        assert entry["original_input_shapes"] == [list(original.input_shape)]
        # every argument but the spatial size is the real one
        assert ConvCase.from_dict({**original.to_dict(), "input_shape": case.input_shape}) == case
        assert all(n <= 6 for n in case.input_shape[2:]), case
        was = "x".join(map(str, original.input_shape))
        now = "x".join(map(str, case.input_shape))
        assert entry["source"].endswith(f"; --max-spatial 6: input_shape {was} -> {now}")
        out_tensor = build.build_module(case)(*build.make_inputs(case))
        assert out_tensor.numel() > 0  # eager runs it and the output is not empty
    patch = next(ConvCase.from_dict(e["case"]) for e in entries if e["modules"] == ["patch"])
    assert patch.input_shape == (1, 8, 4, 4)  # k4 s4 "valid": 64 -> 4, one whole window


@pytest.mark.parametrize("real, limit, want", [
    # SigLIP's patch embed: 224 = 16 x 14; at most 32 keeps the windows whole -> 28
    (dict(kernel_size=(14, 14), stride=(14, 14), padding="valid", size=224), 32, 28),
    # a stride remainder is kept: 230 = 16 x 14 + 6 -> 20 = 14 + 6 (the overhang stays)
    (dict(kernel_size=(14, 14), stride=(14, 14), padding="valid", size=230), 32, 20),
    # the limit is below the kernel's reach: the smallest size with an output, no smaller
    (dict(kernel_size=(10,), stride=(5,), padding=(0,), size=16000), 8, 10),
    # wav2vec2's positional conv k128 p64 g16 needs no minimum beyond 1 (padding covers it)
    (dict(kernel_size=(128,), stride=(1,), padding=(64,), size=49, groups=16), 8, 8),
    (dict(kernel_size=(3, 3), stride=(1, 1), padding="same", size=112), 5, 5),
    (dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(2, 2), size=113), 9, 9),
])
def test_shrink_keeps_the_output_and_the_stride_remainder(real, limit, want):
    real = dict(real)
    size, dim = real.pop("size"), len(real["kernel_size"])
    channels = 16 if real.get("groups") else 2
    case = ConvCase(dim=dim, in_channels=channels, out_channels=channels,
                    input_shape=(1, channels) + (size,) * dim, **real)
    small = shrink(case, limit)
    assert small.input_shape[2:] == (want,) * dim
    assert build.build_module(small)(*build.make_inputs(small)).numel() > 0
    assert shrink(small, limit) == small


def test_shrink_keeps_a_transposed_output_non_empty():
    case = ConvCase(dim=1, transposed=True, in_channels=2, out_channels=2, kernel_size=(3,),
                    stride=(1,), padding=(4,), input_shape=(1, 2, 40))
    small = shrink(case, 2)  # out = (L - 1) - 2*4 + 3 >= 1 needs L >= 7
    assert small.input_shape == (1, 2, 7)
    assert build.build_module(small)(*build.make_inputs(small)).shape[-1] == 1


@pytest.mark.parametrize("args, words", [
    (["nomodule_zz:tiny"], "cannot import nomodule_zz (ModuleNotFoundError"),
    (["tinymods"], "must be MODULE:NAME"),
    (["tinymods:nothing_here"], "tinymods has no attribute 'nothing_here'"),
    (["tinymods:NOT_CALLABLE"], "is a int, not callable"),
    (["tinymods:not_a_module", "--input-shape", "1,3,8,8"], "returned a str, not a torch.nn.Module"),
    (["tinymods:tiny", "--input-shape", "1,3,x"], "must be positive ints separated by commas"),
    (["tinymods:tiny", "--input-shape", "1,3,0,4"], "must be positive ints separated by commas"),
    (["tinymods:tiny", "--input-shape", "1,5,16,16"], "forward of the model raised RuntimeError"),
    (["tinymods:tiny"], "says no input shape: give --input-shape or --input-factory"),
    (["tinymods:tiny", "--input-shape", "1,3,8,8", "--input-factory", "tinymods:double_input"],
     "not allowed with argument"),
    (["tinymods:tiny", "--input-shape", "1,3,8,8", "--max-spatial", "0"], "--max-spatial must be >= 1"),
    (["tinymods:tiny", "--input-factory", "tinymods:gone"], "has no attribute 'gone'"),
])
def test_bad_input_is_one_line_and_exit_2(models, tmp_path, capsys, args, words):
    out = tmp_path / "never.json"
    assert from_model(*args, "--out", out) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("convconf: error: "), lines
    assert words in lines[0]
    assert not out.exists()


def test_an_existing_file_is_kept_unless_overwrite(models, tmp_path, capsys):
    out = tmp_path / "kept.json"
    out.write_text("[]")
    assert from_model("tinymods:tiny", "--input-shape", "1,3,8,8", "--out", out) == 2
    assert "kept.json already exists; use --overwrite" in capsys.readouterr().err
    assert out.read_text() == "[]"
    assert from_model("tinymods:tiny", "--input-shape", "1,3,8,8", "--out", out,
                      "--overwrite") == 0
    assert len(json.loads(out.read_text())) == len(expected_tiny(8))


def test_the_process_exits_2_on_an_unimportable_factory(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness", "cases", "from-model", "nomod_q:f",
                           "--input-shape", "1,3,8,8", "--out", tmp_path / "x.json"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "convconf: error: cases from-model: factory 'nomod_q:f': cannot import nomod_q "
        "(ModuleNotFoundError: No module named 'nomod_q')"]


def test_case_sources_join_files_and_ignore_plain_cases(tmp_path):
    case = ConvCase(dim=1, in_channels=2, out_channels=2, kernel_size=3, input_shape=(1, 2, 8))
    (tmp_path / "a.json").write_text(json.dumps([{"case": case.to_dict(), "source": "m1 @ x"}]))
    (tmp_path / "b.json").write_text(json.dumps([{"case": case.to_dict(), "source": "m2 @ y"}]))
    (tmp_path / "plain.json").write_text(json.dumps([case.to_dict()]))
    files = [tmp_path / n for n in ("a.json", "b.json", "plain.json", "gone.json")]
    assert case_sources(files) == {case.case_id: "m1 @ x | m2 @ y"}


@pytest.mark.slow
def test_run_cases_carries_source_into_matrix_and_report(models, tmp_path):
    cases = tmp_path / "tiny.json"
    run = subprocess.run([sys.executable, "-m", "harness", "cases", "from-model", "tinymods:tiny",
                          "--input-shape", "1,3,8,8", "--out", cases], capture_output=True,
                         text=True, cwd=models, env=_env(), timeout=300)
    assert run.returncode == 0, run.stderr
    entries = json.loads(cases.read_text())[:2]  # stem and body: two cases keep it quick
    cases.write_text(json.dumps(entries))
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "--out", out, "--cases", cases,
                           "--max-examples", "0", "--backends", "xnnpack", "--no-cache", "-j", "1",
                           "--no-progress"], capture_output=True, text=True, env=_env(),
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads((out / "matrix.json").read_text())
    want = {ConvCase.from_dict(e["case"]).case_id: e["source"] for e in entries}
    assert {r["case_id"]: r["source"] for r in rows} == want  # ids are the cases' own
    for row in rows:  # each executed and honest (the statuses themselves: XNNPACK's)
        assert_executed(row)
    html = (out / "report.html").read_text()
    assert 'id="f-source"' in html and "<option>tinymods:tiny</option>" in html
    assert "tinymods:tiny @ body.0, body.1" in html


def _env():
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def test_siglip_patch_embed_is_valid_with_stride_equal_to_kernel():
    pytest.importorskip("transformers", reason="the optional extra: pip install -e '.[models]'")
    from harness.generation.from_model import from_model as record_model

    entries, result = record_model("cases.models.zoo:siglip_so400m_patch14_224")
    # transformers 4.x nests the tower one level deeper (vision_model.embeddings...)
    (patch,) = [e for e in entries if e["modules"][0].endswith("embeddings.patch_embedding")]
    case = ConvCase.from_dict(patch["case"])
    assert case.padding == "valid" and case.kernel_size == case.stride == (14, 14)
    assert case.input_shape == (1, 3, 224, 224) and case.out_channels == 1152
    shipped = json.loads((REPO / "cases" / "models" / "siglip_so400m_patch14_224.json").read_text())
    # what the command writes: the same cases (a field added later, at its default, may be
    # spelled out in one and left out in the other)
    assert [ConvCase.from_dict(e["case"]) for e in shipped] == \
        [ConvCase.from_dict(e["case"]) for e in entries]


def test_shipped_model_case_files_load_and_name_their_source():
    files = sorted((REPO / "cases" / "models").glob("*.json"))
    assert len(files) >= 8
    for path in files:
        entries = json.loads(path.read_text())
        assert len(load_cases(str(path))) == len(entries) > 0, path.name
        model = f"cases.models.zoo:{path.stem}"
        assert all(e["source"].startswith(f"{model} @ ") and e["modules"] for e in entries)


def test_each_conv_carries_its_context_in_the_model(models, tmp_path, capsys):
    """conv -> bn -> relu, a residual add, relu6, an explicit pad before a conv with padding 0:
    the case carries what the exported graph does around the conv; what no case op says is
    named in the source; the same conv in the same context from two places is one case."""
    out = tmp_path / "ctx.json"
    assert from_model("tinymods:ctx", "--input-shape", "1,3,17,17", "--out", out) == 0
    entries = json.loads(out.read_text())
    by_path = {p: e for e in entries for p in e["modules"]}
    cases = {p: ConvCase.from_dict(e["case"]) for p, e in by_path.items()}

    stem = cases["stem"]
    assert stem.prologue == ("pad", (0, 1, 0, 1), 0.0)
    assert stem.input_shape == (1, 3, 17, 17)  # the pad's input; the conv sees 18x18
    assert stem.conv_input_shape() == (1, 3, 18, 18)
    assert stem.epilogue == ("batchnorm", "relu6")

    assert cases["b1.conv1"].epilogue == ("batchnorm", "relu")
    assert cases["b1.conv2"].epilogue == ("batchnorm", "add", "relu")
    assert by_path["b1.conv1"]["modules"] == ["b1.conv1", "b2.conv1"]  # one case, two places
    assert by_path["b1.conv2"]["modules"] == ["b1.conv2", "b2.conv2"]

    assert cases["dw"].epilogue == () and cases["dw"].prologue is None
    assert by_path["dw"]["context_rest"] == ["then permute -> layer_norm"]
    assert "; beyond the case: then permute -> layer_norm" in by_path["dw"]["source"]

    # one module, two calls in two contexts: two cases, each naming the module
    se = [e for e in entries if e["modules"] == ["se"]]
    assert sorted(ConvCase.from_dict(e["case"]).epilogue for e in se) == [(), (("clamp", -1.0, None),)]
    assert [e.get("context_rest") for e in se if not e["case"]["epilogue"]] == [["then silu"]]

    # a padding_mode's pad is the conv's own, not a prologue
    assert cases["refl"].prologue is None and cases["refl"].padding_mode == "reflect"

    said = capsys.readouterr().out
    assert f"{len(entries)} distinct conv case(s) from 9 conv call(s); " \
           f"{sum(ConvCase.from_dict(e['case']).has_context for e in entries)} with a prologue or epilogue" in said
    for case in {ConvCase.from_dict(e["case"]) for e in entries}:  # what run --cases builds
        out_tensor = build.build_module(case)(*build.make_inputs(case))
        assert out_tensor.shape == case.output_shape()


def test_no_context_records_the_lone_convs(models, tmp_path):
    out = tmp_path / "lone.json"
    assert from_model("tinymods:ctx", "--input-shape", "1,3,17,17", "--no-context",
                      "--out", out) == 0
    entries = json.loads(out.read_text())
    cases = [ConvCase.from_dict(e["case"]) for e in entries]
    assert not any(c.has_context for c in cases)
    stem = next(c for c, e in zip(cases, entries) if e["modules"] == ["stem"])
    assert stem.input_shape == (1, 3, 18, 18)  # what the conv saw, the pad not separated
    assert all("context_rest" not in e and "beyond" not in e["source"] for e in entries)


def test_shipped_resnet_and_mobilenet_cases_carry_their_epilogues():
    """The regenerated model files: ResNet's bottleneck is conv -> bn -> relu and conv -> bn ->
    add -> relu; MobileNetV2's TF padding is an explicit pad before conv -> bn -> relu6."""
    def cases(name):
        return load_cases(str(REPO / "cases" / "models" / f"{name}.json"))

    resnet = {c.epilogue for c in cases("resnet50")}
    assert resnet == {("batchnorm", "relu"), ("batchnorm", "add", "relu")}
    mobilenet = cases("mobilenet_v2")
    assert all(c.prologue is not None and c.prologue[0] == "pad" for c in mobilenet)
    assert ("batchnorm", "relu6") in {c.epilogue for c in mobilenet}
    assert any(any(c.prologue[1]) for c in mobilenet)  # a real (non-zero) TF pad


def test_a_model_that_does_not_export_is_recorded_alone_and_says_why(models, tmp_path, capsys):
    out = tmp_path / "branchy.json"
    assert from_model("tinymods:branchy", "--input-shape", "1,2,8,8", "--out", out) == 0
    said = capsys.readouterr()
    assert "convconf: no context recorded: torch.export failed (" in said.err
    (entry,) = json.loads(out.read_text())
    assert not ConvCase.from_dict(entry["case"]).has_context and entry["modules"] == ["conv"]
    assert "1 distinct conv case(s) from 1 conv call(s); 0 with a prologue or epilogue" in said.out


def test_a_pad_the_case_cannot_carry_is_named_not_dropped():
    """An explicit pad before a conv with padding of its own: no prologue (a case's prologue
    needs padding 0), the conv as it ran, the pad named beside the epilogue's rest."""
    conv = ConvCase(dim=2, in_channels=2, out_channels=2, kernel_size=(3, 3), padding=(1, 1),
                    input_shape=(1, 2, 10, 10))
    here = ConvContext(prologue=("pad", (1, 1, 1, 1), 0.0), epilogue=("relu",), rest="gelu")
    case, rest = case_in_context(conv, here)
    assert case.prologue is None and case.input_shape == (1, 2, 10, 10)
    assert case.epilogue == ("relu",)
    assert rest.startswith("after pad [1, 1, 1, 1] value 0 (field 'padding': a prologue pads")
    assert rest.endswith("; then gelu")
    # padding 0: the pad becomes the prologue and the case's input is the pad's input
    zero = ConvCase.from_dict({**conv.to_dict(), "padding": [0, 0]})
    case, rest = case_in_context(zero, here)
    assert case.prologue == ("pad", (1, 1, 1, 1), 0.0) and case.input_shape == (1, 2, 8, 8)
    assert rest == "then gelu"
