"""ExecuTorch's own conv operator tests, run beside ours (``nox -s etsuite``).

The wheel ships ExecuTorch's backend operator suite (``executorch/backends/test/suite``). Its
conv tests (``operators/test_conv{1d,2d,3d}.py``, ``test_convtranspose{1d,2d,3d}.py``) are run
here, per test file and flow, each in a subprocess of its own with our Vulkan plug-in loaded
(pytest-forked does not work with pytest 9: a native abort in one subtest would otherwise take
the whole session with it). This module is also the pytest plug-in those subprocesses load
(``-p harness.run.etsuite``): it wraps the suite's ``run_test`` to journal each subtest's
configuration and verdict as it happens (a "start" line before, a "done" line after, fsynced),
so a subtest that killed its process is the one that started and never finished; the driver then
runs the rest of that file and flow again without the tests already seen.

The same configurations, read from the suite's test functions without lowering anything
(``configurations``), become ConvCases (``cases/etsuite_conv.json``), which the harness runs on
both backends, stock and with every fix. ``harness.results.etsuite`` puts the two side by side.

Nothing heavy is imported at module level: the plug-in is imported by every suite subprocess.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness.results.etsuite import SuiteConfig, SuiteVerdict

SUITE_FILES = ("test_conv1d", "test_conv2d", "test_conv3d",
               "test_convtranspose1d", "test_convtranspose2d", "test_convtranspose3d")
# flow -> (our backend, our quantization scheme of that flow's cases)
FLOWS = {
    "xnnpack": ("xnnpack", None),
    "xnnpack_static_int8_per_channel": ("xnnpack", "int8_per_channel"),
    "vulkan": ("vulkan", None),
    "vulkan_static_int8_per_channel": ("vulkan", "int8_per_channel"),
}
ENV_RECORDS = "CONVCONF_ETSUITE_RECORDS"
ENV_FILE = "CONVCONF_ETSUITE_FILE"
ENV_VULKAN = "CONVCONF_ETSUITE_VULKAN"


def suite_dir() -> Path:
    import executorch

    return Path(list(executorch.__path__)[0]) / "backends" / "test" / "suite"


# --- the suite's configurations, read without running it ------------------------------------

class _Recorder:
    """Stands in for the suite's TestRunner: records the model and inputs of each call."""

    def __init__(self, file: str, test: str):
        self.file, self.test, self.calls = file, test, []
        self._flow = None

    def lower_and_run_model(self, model, inputs, generate_random_test_inputs=True,
                            dynamic_shapes=None):
        self.calls.append(config_of(self.file, self.test, len(self.calls), model, inputs))


def config_of(file: str, test: str, subtest: int, model, inputs) -> SuiteConfig:
    import torch

    from harness.generation.from_model import case_of

    convs = [m for m in model.modules() if isinstance(m, torch.nn.modules.conv._ConvNd)]
    if len(convs) != 1 or len(inputs) != 1:
        return SuiteConfig(file, test, subtest, None, f"{len(convs)} convs, {len(inputs)} inputs")
    x = inputs[0]
    try:
        case = case_of(convs[0], tuple(x.shape), str(x.dtype).removeprefix("torch."))
    except ValueError as e:
        return SuiteConfig(file, test, subtest, None, str(e).splitlines()[0])
    return SuiteConfig(file, test, subtest, case)


def configurations(files=SUITE_FILES) -> list[SuiteConfig]:
    """Every ``_test_op`` call of the suite's conv test functions, in file and test order. The
    test bodies are called with a recorder instead of the suite's runner: nothing is lowered."""
    import importlib
    import inspect

    import torch

    out = []
    for file in files:
        module = importlib.import_module(f"executorch.backends.test.suite.operators.{file}")
        for name in sorted(n for n in vars(module) if n.startswith("test")):
            fn = getattr(module, name)
            if not callable(fn) or inspect.isclass(fn):
                continue
            recorder = _Recorder(file, name)
            params = inspect.signature(fn).parameters
            torch.manual_seed(0)
            fn(recorder, torch.float32) if "dtype" in params else fn(recorder)
            out += recorder.calls
    return out


def corpus_entries(configs: list[SuiteConfig], flows=tuple(FLOWS)) -> list[dict]:
    """One entry per distinct ConvCase of the configurations under the flows, with where it comes
    from (``source``: file::test[subtest] @ flows)."""
    seen: dict[str, dict] = {}
    for config in configs:
        for flow in flows:
            case = config.case_for(FLOWS[flow][1])
            if case is None:
                continue
            entry = seen.setdefault(case.case_id, {"case": case.to_dict(), "sources": []})
            where = f"{config.file}::{config.test}[{config.subtest}]"
            if where not in entry["sources"]:
                entry["sources"].append(where)
    return [{"case": e["case"],
             "source": "executorch backends/test/suite: " + ", ".join(e["sources"])}
            for e in seen.values()]


# --- running the suite, one subprocess per test file and flow -------------------------------

def _journal(record: dict) -> None:
    path = os.environ.get(ENV_RECORDS)
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _op_counts(counter) -> dict:
    return {str(k): int(v) for k, v in dict(counter or {}).items()}


def _wrap_run_test(original):
    def run_test(model, inputs, flow, test_name, test_base_name, subtest_index, params,
                 *args, **kwargs):
        base = {"file": os.environ.get(ENV_FILE, ""), "test": test_base_name,
                "subtest": subtest_index, "flow": flow.name, "node": test_name}
        _journal({**base, "event": "start"})
        t0 = time.perf_counter()
        summary = original(model, inputs, flow, test_name, test_base_name, subtest_index, params,
                           *args, **kwargs)
        stats = list(summary.tensor_error_statistics or [])
        error = "" if summary.error is None else f"{type(summary.error).__name__}: {summary.error}"
        _journal({**base, "event": "done", "result": summary.result.name,
                  "detail": summary.result.to_detail_str(), "error": error[:400],
                  "delegated_ops": _op_counts(getattr(summary, "delegated_op_counts", None)),
                  "undelegated_ops": _op_counts(getattr(summary, "undelegated_op_counts", None)),
                  "error_max": float(stats[0].error_max) if stats else None,
                  "seconds": round(time.perf_counter() - t0, 3)})
        return summary

    run_test.convconf_wrapped = True
    return run_test


# pytest plug-in hooks (active only in the suite subprocesses, which load this module with -p)

def pytest_configure(config):
    library = os.environ.get(ENV_VULKAN)
    if library:
        from harness.runtimes import load

        if not load.load(library):
            raise RuntimeError(f"{library}: loaded, but VulkanBackend is not registered")


def pytest_collection_finish(session):
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", "") or ""
        if path.endswith(os.path.join("backends", "test", "suite", "conftest.py")) and \
                hasattr(module, "run_test") and not getattr(module.run_test, "convconf_wrapped",
                                                            False):
            module.run_test = _wrap_run_test(module.run_test)


def read_journal(path: Path) -> tuple[list[SuiteVerdict], list[dict]]:
    """-> the finished subtests, and the ones that started and never finished (crashed)."""
    done, started = {}, {}
    if not path.exists():
        return [], []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by the crash
        key = (rec["file"], rec["test"], rec["subtest"], rec["flow"])
        if rec["event"] == "start":
            started[key] = rec
        else:
            done[key] = SuiteVerdict.from_dict(rec)
            started.pop(key, None)
    return list(done.values()), list(started.values())


def run_suite_file(file: str, flow: str, out: Path, *, vulkan_library: str | None,
                   timeout_s: float = 1800, log=print) -> list[SuiteVerdict]:
    """The suite's ``file`` under ``flow``, in subprocesses: again without the finished and
    crashed test functions after a process died, until one ends by itself."""
    journal = out / f"{file}.{flow}.jsonl"
    journal.unlink(missing_ok=True)
    path = suite_dir() / "operators" / f"{file}.py"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, ENV_RECORDS: str(journal), ENV_FILE: file,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    if vulkan_library:
        env[ENV_VULKAN] = vulkan_library
    ini = out / "pytest.ini"  # not the project's: no addopts, no strict markers
    ini.write_text("[pytest]\n")
    crashed: list[SuiteVerdict] = []
    gone: set[str] = set()  # node names never to run again (finished, or crashed)
    for attempt in range(50):
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-p", "harness.run.etsuite", "-c", str(ini), "--rootdir", str(suite_dir()),
               "-m", f"flow_{flow}", str(path)]
        cmd += [a for node in sorted(gone) for a in ("--deselect", f"{path}::{node}")]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, env=env, cwd=out, capture_output=True, text=True,
                                  timeout=timeout_s)
            rc, tail = proc.returncode, (proc.stdout + proc.stderr)[-2000:]
        except subprocess.TimeoutExpired as e:
            rc, tail = "timeout", str(e.stdout or "")[-2000:]
        done, unfinished = read_journal(journal)
        (out / f"{file}.{flow}.log").open("a").write(f"--- attempt {attempt} rc={rc}\n{tail}\n")
        log(f"etsuite: {file} [{flow}] attempt {attempt}: rc {rc}, {len(done)} subtests done, "
            f"{len(unfinished)} unfinished, {time.perf_counter() - t0:.0f} s")
        if not unfinished:
            break
        for rec in unfinished:  # the subtest that was running when the process died
            crashed.append(SuiteVerdict(rec["file"], rec["test"], rec["subtest"], rec["flow"],
                                        "PROCESS_CRASH", detail="Process Crash",
                                        error=f"process ended ({rc}) in this subtest"))
            gone.add(rec["node"])
        gone |= {_node(v) for v in done}
        journal.write_text("".join(json.dumps({**v.to_dict(), "event": "done",
                                               "node": _node(v)}) + "\n" for v in done))
    done, _ = read_journal(journal)
    return done + crashed


def _node(v: SuiteVerdict) -> str:
    return f"{v.test}[{v.flow}]"


def fill_not_run(verdicts: list[SuiteVerdict], configs: list[SuiteConfig],
                 flows) -> list[SuiteVerdict]:
    """A subtest the suite never reached (an earlier subtest of its test function raised, which
    ends the function, or crashed the process) is NOT_RUN, so every configuration has a row."""
    have = {(v.key, v.flow) for v in verdicts}
    out = list(verdicts)
    for config in configs:
        for flow in flows:
            if (config.key, flow) not in have:
                out.append(SuiteVerdict(config.file, config.test, config.subtest, flow, "NOT_RUN",
                                        detail="an earlier subtest of this test function failed "
                                        "or crashed: the suite stops the function there"))
    return out


# --- the whole comparison ---------------------------------------------------------------------

def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m harness.run.etsuite")
    parser.add_argument("--out", default="runs/etsuite")
    parser.add_argument("--files", nargs="*", default=list(SUITE_FILES))
    parser.add_argument("--flows", nargs="*", default=list(FLOWS))
    parser.add_argument("--cases-out", default=None,
                        help="write the configurations as a case file with our expectations")
    parser.add_argument("--vulkan-runtime", default="auto")
    parser.add_argument("--timeout", type=float, default=1800, help="per suite subprocess")
    parser.add_argument("-j", "--jobs", type=int, default=None)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.flows) - set(FLOWS)) + sorted(set(args.files) - set(SUITE_FILES))
    if unknown:
        print(f"convconf: error: unknown flow or file: {', '.join(unknown)}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    from harness.runtimes import load

    library = load.resolve(args.vulkan_runtime)
    configs = configurations(args.files)
    entries = corpus_entries(configs, args.flows)
    cases_path = out / "cases.json"
    cases_path.write_text(json.dumps(entries, indent=1))

    # ours: the harness on the same configurations, both lanes of each flow's backend
    backends = sorted({FLOWS[f][0] for f in args.flows})
    ours_dir = out / "ours"
    cmd = [sys.executable, "-m", "harness", "run", "--out", str(ours_dir), "--cases",
           str(cases_path), "--max-examples", "0", "--backends", ",".join(backends),
           "--fixes", "all", "--overwrite", "--no-progress",
           "--vulkan-runtime", library or "none"]
    if args.jobs:
        cmd += ["-j", str(args.jobs)]
    t_ours = time.perf_counter()
    subprocess.run(cmd, check=True)
    ours_s = time.perf_counter() - t_ours

    # the suite's, per file and flow
    t_suite = time.perf_counter()
    verdicts = []
    suite_out = out / "suite"
    suite_out.mkdir(exist_ok=True)
    for file in args.files:
        for flow in args.flows:
            verdicts += run_suite_file(file, flow, suite_out, vulkan_library=library,
                                       timeout_s=args.timeout)
    verdicts = fill_not_run(verdicts, [c for c in configs if c.file in args.files], args.flows)
    suite_s = time.perf_counter() - t_suite
    (out / "suite.json").write_text(json.dumps([v.to_dict() for v in verdicts], indent=1))

    from harness.results import etsuite as table
    from harness.runfolder import RunFolder

    cells = RunFolder(ours_dir).cells()
    rows = table.side_by_side(configs, verdicts, cells, {f: FLOWS[f] for f in args.flows})
    timing = {"total_s": round(time.perf_counter() - t0, 1), "suite_s": round(suite_s, 1),
              "ours_s": round(ours_s, 1)}
    table.write(out, rows, timing)
    print(table.summary_text(rows, timing))
    if args.cases_out:
        Path(args.cases_out).write_text(json.dumps(table.corpus_with_expectations(entries, cells),
                                                   indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
