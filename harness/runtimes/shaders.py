"""The Vulkan conv shader variants a plug-in's source can dispatch: the universe that observed
coverage (a cell's ``reached``) is measured against.

The runtime builds its shader registry from ``backends/vulkan/runtime/graph/ops/glsl/*.yaml``
(``gen_vulkan_spv.py``: each template's ``shader_variants`` times its ``generate_variant_forall``
values, each value adding ``_SUFFIX`` to the name). ``conv_shaders`` expands those templates the
same way, read from the source the plug-in was built from (the copy its cache entry keeps,
``vulkan.Manifest.shader_universe``: a tarball or a tree), for the templates that the conv operators the partitioner delegates
(``aten.convolution``, ``et_vk.conv_with_clamp``, ``et_vk.q8ta_conv2d*``) dispatch from their
execute nodes. Weight-prepack shaders (``*_prepack_weights``, ``pack_*``) are left out: they run
in PrepackNode, which the runtime's dispatch profiling (what a cell's ``reached`` is read from)
does not report.
"""

from __future__ import annotations

import itertools
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

GLSL_DIR = "backends/vulkan/runtime/graph/ops/glsl/"

# template -> where the runtime picks it (ExecuTorch main cff6f4dd32, graph/ops/impl/)
ROUTED = {
    "conv2d": "Convolution.cpp:164 get_conv2d_shader (SlidingWindow, direct)",
    "conv_transpose2d": "Convolution.cpp:167 get_conv2d_shader (Transposed)",
    "conv2d_pw_tiled": "Conv2dPW.cpp:63 pick_conv2d_pw_tiled_shader (every pointwise, "
                       "Convolution.cpp:505)",
    "conv2d_dw": "Conv2dDW.cpp:73 pick_conv2d_dw_shader (kernel not 3x3/5x5)",
    "conv2d_dw_output_tile": "Conv2dDW.cpp:85-90 (3x3 / 5x5, stride == dilation)",
    "conv2d_dw_sned_output_tile": "Conv2dDW.cpp:81 (3x3 / 5x5, stride != dilation)",
    "conv2d_im2col": "Conv2dIm2Col.cpp:180 (im2col + GEMM, Convolution.cpp:317 "
                     "should_use_conv2d_im2col)",
    "conv2d_gemm": "Conv2dGemm.cpp:154 pick_conv2d_gemm_shader",
    "conv1d": "Convolution.cpp:676 add_conv1d_node (channels-packed conv1d)",
    "conv1d_pw": "Conv1dPW.cpp:120 (height-packed conv1d, K=1, Convolution.cpp:783)",
    "conv1d_dw": "Conv1dDW.cpp:120 (height-packed conv1d, depthwise, Convolution.cpp:785)",
    "q8ta_conv2d": "Q8taConv2d.cpp:339 (int8 general; _fallback without int8 dot product)",
    "q8ta_im2col": "Q8taConv2dIm2Col.cpp:188 (int8 im2col)",
    "q8ta_conv2d_pw": "Q8taConv2dPW.cpp:309 (int8 pointwise)",
    "q8ta_conv2d_dw": "Q8taConv2dDW.cpp:369 (int8 depthwise)",
    "conv2d_dw_q8ta_q8csw_q8to": "Q8taConv2dDW.cpp:270 (int8 depthwise, buffer storage)",
    "q8ta_conv2d_transposed": "Q8taConv2dTransposed.cpp:182 (int8 transposed)",
}
# In the source, never picked by a delegated op: every pointwise conv2d goes to conv2d_pw_tiled
# (Convolution.cpp:505) before get_conv2d_shader could name these.
UNROUTED = ("conv2d_pw", "conv2d_pw_s1p0")


@dataclass(frozen=True)
class ShaderUniverse:
    """The conv shader variants of one source, by family (template)."""
    source: str = ""                                  # what they were read from
    families: dict = field(default_factory=dict)      # template -> [variant names]
    unrouted: dict = field(default_factory=dict)      # template -> [variant names]
    problem: str = ""                                 # why there are none ("" when there are)

    @property
    def known(self) -> list[str]:
        return sorted(n for names in self.families.values() for n in names)

    def to_dict(self) -> dict:
        return {"source": self.source, "families": self.families, "unrouted": self.unrouted,
                "problem": self.problem}

    @classmethod
    def from_dict(cls, data: dict | None) -> ShaderUniverse:
        data = data or {}
        return cls(source=data.get("source", ""), families=data.get("families", {}),
                   unrouted=data.get("unrouted", {}), problem=data.get("problem", ""))


def expand(template_yaml: str) -> dict[str, list[str]]:
    """One glsl template YAML -> {template: [variant names]}, as gen_vulkan_spv.py names them
    (SPVGenerator.parseTemplateYaml / generateVariantCombinations)."""
    import yaml

    out: dict[str, list[str]] = {}
    for template, params in (yaml.safe_load(template_yaml) or {}).items():
        default_forall = params.get("generate_variant_forall")
        names = []
        for variant in params.get("shader_variants", []):
            forall = variant.get("generate_variant_forall", default_forall)
            if not forall:
                names.append(variant["NAME"])
                continue
            axes = []
            for param, values in forall.items():
                if re.match(r"^combination\d*$", param):
                    axes.append([c.get("suffix", "_".join(str(v) for v in c["parameter_values"]
                                                          if str(v)))
                                 for c in values["combos"]])
                elif param not in variant:  # a value the variant sets itself is not iterated
                    axis = []
                    for v in values:
                        if "RANGE" in v:
                            lo, hi = v["RANGE"]
                            pre = v.get("SUFFIX", "")
                            axis += [f"{pre}_{i}" if pre else str(i) for i in range(lo, hi + 1)]
                        else:
                            axis.append(str(v.get("SUFFIX", v["VALUE"])))
                    axes.append(axis)
            for combo in itertools.product(*axes):
                names.append("_".join([variant["NAME"]] + [s for s in combo if s]))
        out[template] = names
    return out


def _yaml_texts(origin: Path) -> dict[str, str]:
    """template file stem -> its YAML text, for the ROUTED and UNROUTED templates."""
    wanted = set(ROUTED) | set(UNROUTED)
    texts = {}
    if origin.is_dir():
        for stem in wanted:
            f = origin / GLSL_DIR / f"{stem}.yaml"
            if f.is_file():
                texts[stem] = f.read_text()
        return texts
    with tarfile.open(origin) as tf:
        for member in tf:
            name = member.name.lstrip("./")
            if name.startswith(GLSL_DIR) and name.endswith(".yaml"):
                stem = name[len(GLSL_DIR):-len(".yaml")]
                if stem in wanted:
                    texts[stem] = tf.extractfile(member).read().decode()
    return texts


def conv_shaders(origin: str | Path | None, label: str = "") -> ShaderUniverse:
    """The conv shader universe of the ExecuTorch source at ``origin`` (a source tarball or
    tree). ``label`` is what the universe says it was read from (default: the path); a cache
    entry gives its source's commit, so that no path of one machine travels in a run header."""
    if not origin:
        return ShaderUniverse(problem="no runtime source known (no Vulkan plug-in manifest)")
    path = Path(origin)
    label = label or str(origin)
    if not path.exists():
        return ShaderUniverse(source=label, problem=f"runtime source {origin} is not there")
    try:
        texts = _yaml_texts(path)
    except (OSError, tarfile.TarError) as e:
        return ShaderUniverse(source=label, problem=f"cannot read {origin}: {e}")
    families, unrouted = {}, {}
    for stem, text in sorted(texts.items()):
        for template, names in expand(text).items():
            (unrouted if template in UNROUTED else families)[template] = sorted(names)
    missing = sorted(set(ROUTED) - set(families))
    problem = f"templates not in this source: {', '.join(missing)}" if missing else ""
    return ShaderUniverse(source=label, families=families, unrouted=unrouted, problem=problem)
