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
(``configurations``), become ConvCases (``cases/nightly/etsuite_conv.json``), which the harness runs on
both backends, stock and with every fix. ``harness.results.etsuite`` puts the two side by side.

Nothing heavy is imported at module level: the plug-in is imported by every suite subprocess.
"""

from __future__ import annotations

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
# TEST_NAME:SUBTEST (e.g. test_conv1d_padding:0): that subtest's process aborts (SIGABRT) once it
# has journaled its start, as a native crash in the runtime would: how tests/test_etsuite.py
# checks that one crashed configuration does not take the run down
ENV_ABORT = "CONVCONF_ETSUITE_ABORT"


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


def configurations(files=SUITE_FILES, tests=None) -> list[SuiteConfig]:
    """Every ``_test_op`` call of the suite's conv test functions (those named in ``tests``, when
    given), in file and test order. The test bodies are called with a recorder instead of the
    suite's runner: nothing is lowered."""
    import importlib
    import inspect

    import torch

    out = []
    for file in files:
        module = importlib.import_module(f"executorch.backends.test.suite.operators.{file}")
        for name in sorted(n for n in vars(module) if n.startswith("test")
                           and (not tests or n in tests)):
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
        _journal({**base, "event": "start", "t": time.time()})
        if os.environ.get(ENV_ABORT) == f"{test_base_name}:{subtest_index}":
            os.abort()
        t0 = time.perf_counter()
        try:
            summary = original(model, inputs, flow, test_name, test_base_name, subtest_index,
                               params, *args, **kwargs)
        except BaseException as e:  # the suite's own code raised (it catches its stages')
            _journal({**base, "event": "done", "result": "UNKNOWN_FAIL",
                      "detail": "run_test raised", "error": f"{type(e).__name__}: {e}"[:400],
                      "seconds": round(time.perf_counter() - t0, 3)})
            raise
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


def read_journal(path: Path) -> tuple[list[SuiteVerdict], list[dict], set[str]]:
    """-> the finished subtests, the ones that started and never finished (crashed), and the
    pytest node names (``test_conv2d_dtype[vulkan-float32]``) that finished a subtest."""
    done, started, nodes = {}, {}, set()
    if not path.exists():
        return [], [], nodes
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
            if rec.get("node"):
                nodes.add(rec["node"])
    return list(done.values()), list(started.values()), nodes


def _ended(rc) -> str:
    import signal

    if rc == "timeout":
        return rc
    if isinstance(rc, int) and rc < 0:
        try:
            return f"signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"exit {rc}"


def run_suite_file(file: str, flow: str, out: Path, *, vulkan_library: str | None,
                   timeout_s: float = 1800, subtest_timeout_s: float = 600, tests=None,
                   resume: bool = False, log=print) -> list[SuiteVerdict]:
    """The suite's ``file`` under ``flow``, in subprocesses: after a process died (abort,
    segfault, or a subtest running past ``subtest_timeout_s``, which is killed), again without
    the test functions already finished or crashed, until one ends by itself. The subtest that
    was running when its process died is PROCESS_CRASH (the suite's "Process Crash"), journaled
    like the others. ``resume``: a file and flow that completed before is read back; one cut
    short (the driver was killed) continues after its finished test functions."""
    import signal

    out = Path(out).resolve()  # the subprocesses run in it
    journal = out / f"{file}.{flow}.jsonl"
    complete = out / f"{file}.{flow}.complete"
    logfile = out / f"{file}.{flow}.log"
    if resume and complete.is_file():
        return read_journal(journal)[0]
    complete.unlink(missing_ok=True)
    if resume and journal.is_file():
        # keep the test functions that finished; one cut short by the kill runs again whole
        records = [json.loads(line) for line in journal.read_text().splitlines()
                   if line.strip().endswith("}")]
        _, cut, _ = read_journal(journal)
        again = {r["node"] for r in cut}
        journal.write_text("".join(json.dumps(r) + "\n" for r in records
                                   if r["event"] == "done" and r.get("node") not in again))
    else:
        journal.unlink(missing_ok=True)
        logfile.unlink(missing_ok=True)
    path = suite_dir() / "operators" / f"{file}.py"
    node_prefix = f"operators/{file}.py"  # node ids are relative to --rootdir (the suite)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, ENV_RECORDS: str(journal), ENV_FILE: file,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    if vulkan_library:
        env[ENV_VULKAN] = vulkan_library
    else:
        env.pop(ENV_VULKAN, None)
    ini = out / "pytest.ini"  # not the project's: no addopts, no strict markers
    ini.write_text("[pytest]\n")
    gone: set[str] = read_journal(journal)[2]  # nodes never to run again (finished, crashed)
    for attempt in range(50):
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-p", "harness.run.etsuite", "-c", str(ini), "--rootdir", str(suite_dir()),
               "-m", f"flow_{flow}"]
        cmd += [f"{path}::{t}" for t in sorted(tests)] if tests else [str(path)]
        cmd += [a for node in sorted(gone) for a in ("--deselect", f"{node_prefix}::{node}")]
        t0 = time.perf_counter()
        with open(logfile, "a") as lf:
            lf.write(f"--- attempt {attempt}: {' '.join(cmd)}\n")
            lf.flush()
            proc = subprocess.Popen(cmd, env=env, cwd=out, stdout=lf, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            killed = ""
            while proc.poll() is None:
                time.sleep(1)
                _, running, _ = read_journal(journal)
                now = time.time()
                stuck = [r for r in running if now - r.get("t", now) > subtest_timeout_s]
                if stuck or time.perf_counter() - t0 > timeout_s:
                    killed = (f"killed after {subtest_timeout_s:.0f} s in this subtest" if stuck
                              else f"killed: the process ran past {timeout_s:.0f} s")
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            rc = proc.returncode
        done, unfinished, nodes = read_journal(journal)
        log(f"etsuite: {file} [{flow}] attempt {attempt}: {_ended(rc)}, {len(done)} subtests "
            f"done, {len(unfinished)} unfinished, {time.perf_counter() - t0:.0f} s")
        if not unfinished and (rc in (2, 3, 4) or (rc == 5 and not gone)):
            # interrupted, internal or usage error, nothing collected: not a suite verdict
            raise RuntimeError(f"the suite's pytest ended {rc} for {file} [{flow}] before "
                               f"running it: see {logfile}")
        if not unfinished:
            break
        for rec in unfinished:  # the subtest that was running when the process died
            _journal_to(journal, {**rec, "event": "done", "result": "PROCESS_CRASH",
                                  "detail": "Process Crash",
                                  "error": killed or f"process ended ({_ended(rc)}) in this "
                                  f"subtest; its output: {logfile.name}"})
        gone |= nodes | {rec["node"] for rec in unfinished}
    complete.write_text("")
    return read_journal(journal)[0]


def _journal_to(path: Path, record: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


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

def _case_ids(entries: list[dict]) -> list[str]:
    from harness.spec import ConvCase

    return [ConvCase.from_dict(e["case"]).case_id for e in entries]


class _Stop(Exception):
    """End main with one ``convconf: error:`` line and ``code`` (2: bad input, 1: a run failed)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def _parser():
    import argparse

    parser = argparse.ArgumentParser(prog="python -m harness.run.etsuite")
    parser.add_argument("--out", default="runs/etsuite")
    parser.add_argument("--files", nargs="+", default=list(SUITE_FILES))
    parser.add_argument("--flows", nargs="+", default=list(FLOWS))
    parser.add_argument("--cases-out", default=None,
                        help="write the configurations as a case file with our expectations")
    parser.add_argument("--vulkan-runtime", default="auto")
    parser.add_argument("--timeout", type=float, default=3600, help="per suite subprocess")
    parser.add_argument("--subtest-timeout", type=float, default=600,
                        help="a suite subtest running longer is killed (PROCESS_CRASH)")
    parser.add_argument("--tests", nargs="+", default=None, metavar="TEST_FUNCTION",
                        help="only these test functions of the files (e.g. test_conv1d_basic)")
    parser.add_argument("-j", "--jobs", type=int, default=None, help="our run's workers")
    parser.add_argument("--suite-jobs", type=int, default=1,
                        help="suite files/flows run at once (each its own process)")
    parser.add_argument("--resume", action="store_true",
                        help="continue a run of OUT that was killed (same files and flows)")
    parser.add_argument("--table-only", action="store_true",
                        help="only the side-by-side again, from a finished OUT")
    return parser


def _check_arguments(args, out: Path) -> None:
    """Everything wrong with the request, before anything is written (_Stop)."""
    unknown = sorted(set(args.flows) - set(FLOWS)) + sorted(set(args.files) - set(SUITE_FILES))
    if unknown:
        raise _Stop(f"unknown flow or file: {', '.join(unknown)} (flows: {', '.join(FLOWS)}; "
                    f"files: {', '.join(SUITE_FILES)})")
    if args.table_only and not (out / "suite.json").is_file() and \
            not list((out / "suite").glob("*.jsonl")):
        raise _Stop(f"{out}: no suite.json and no suite journals (not an etsuite folder)")
    if not args.table_only and not args.resume and out.exists() and any(out.iterdir()):
        raise _Stop(f"{out} exists and is not empty (--resume to continue it, --table-only to "
                    f"redo the table)")
    if args.resume and not (out / "cases.json").is_file():
        raise _Stop(f"{out}: nothing to resume (no cases.json)")


def _vulkan_library(choice: str) -> str | None:
    if choice == "none":
        return None
    from harness.runtimes import RuntimeBuildError, load

    try:
        return load.resolve(choice)
    except RuntimeBuildError as e:
        raise _Stop(str(e)) from None


def _configurations(args) -> list[SuiteConfig]:
    configs = configurations(args.files, args.tests)
    if args.tests and not configs:
        raise _Stop(f"no test function {', '.join(args.tests)} in {', '.join(args.files)}")
    return configs


def _read_back(out: Path, configs: list[SuiteConfig], flows) -> tuple[list, dict, str]:
    """--table-only: the suite's verdicts and the timing a run left in OUT -> (verdicts, timing,
    a PARTIAL note when the run has not finished, else "")."""
    timing = json.loads((out / "etsuite.json").read_text()).get("timing", {}) \
        if (out / "etsuite.json").is_file() else {}
    if (out / "suite.json").is_file():
        return [SuiteVerdict.from_dict(v) for v in json.loads((out / "suite.json").read_text())], \
            timing, ""
    # a run still going (or killed): the subtests its journals finished so far
    verdicts = [v for j in sorted((out / "suite").glob("*.jsonl")) for v in read_journal(j)[0]]
    for marker in (out / "suite").glob("*.complete"):  # files and flows that finished
        file, flow = marker.name.split(".")[:2]
        verdicts = fill_not_run(verdicts, [c for c in configs if c.file == file], [flow])
    return verdicts, timing, (f"PARTIAL (the run has not finished): {len(verdicts)} of "
                              f"{len(configs) * len(flows)} suite subtests so far")


def _ours_command(args, ours_dir: Path, cases_path: Path, library: str | None) -> list[str]:
    """The harness on the same configurations, both lanes of each flow's backend (or the rest of
    a killed run of it, or nothing when it had finished)."""
    if args.resume and (ours_dir / "matrix.json").is_file():
        return [sys.executable, "-c", "pass"]  # ours had finished
    if args.resume and (ours_dir / "journal.jsonl").is_file():
        return [sys.executable, "-m", "harness", "run", "--resume", str(ours_dir),
                "--no-progress", "--no-report"]
    backends = sorted({FLOWS[f][0] for f in args.flows})
    cmd = [sys.executable, "-m", "harness", "run", "--out", str(ours_dir), "--cases",
           str(cases_path), "--max-examples", "0", "--backends", ",".join(backends),
           "--fixes", "all", "--overwrite", "--no-progress", "--no-report",
           "--vulkan-runtime", library or "none"]
    return cmd + (["-j", str(args.jobs)] if args.jobs else [])


def _run_suite(args, out: Path, configs: list[SuiteConfig], library: str | None) -> list:
    """The suite's verdicts, per file and flow (``--suite-jobs`` at once), every configuration
    with a row; written to OUT/suite.json."""
    from concurrent.futures import ThreadPoolExecutor

    suite_out = out / "suite"
    suite_out.mkdir(exist_ok=True)
    # 3D last: the suite skips every 3D conv after lowering it
    jobs = sorted(((file, flow) for file in args.files for flow in args.flows),
                  key=lambda j: j[0].endswith("3d"))

    def one(job):
        return run_suite_file(*job, suite_out, vulkan_library=library, timeout_s=args.timeout,
                              subtest_timeout_s=args.subtest_timeout, tests=args.tests,
                              resume=args.resume, log=lambda line: print(line, flush=True))

    with ThreadPoolExecutor(max(1, args.suite_jobs)) as pool:
        verdicts = [v for found in pool.map(one, jobs) for v in found]
    verdicts = fill_not_run(verdicts, configs, args.flows)
    (out / "suite.json").write_text(json.dumps([v.to_dict() for v in verdicts], indent=1))
    return verdicts


def _run_both(args, out: Path, configs: list[SuiteConfig], entries: list[dict],
              library: str | None, t0: float) -> tuple[list, dict]:
    """The suite and ours side by side (ours in a process of its own) -> (the suite's verdicts,
    timing since ``t0``); _Stop when ours fails."""
    cases_path, ours_dir = out / "cases.json", out / "ours"
    if args.resume and _case_ids(json.loads(cases_path.read_text())) != _case_ids(entries):
        raise _Stop(f"{out} was run with other files, flows or tests")
    if not args.resume:
        cases_path.write_text(json.dumps(entries, indent=1))
    print(f"etsuite: {len(configs)} configurations in {', '.join(args.files)}; "
          f"{len(entries)} distinct cases under {', '.join(args.flows)}; vulkan runtime: "
          f"{library or 'none'}", flush=True)
    t_ours = time.perf_counter()
    with open(out / "ours.log", "a" if args.resume else "w") as ours_log:
        ours = subprocess.Popen(_ours_command(args, ours_dir, cases_path, library),
                                stdout=ours_log, stderr=subprocess.STDOUT)
        t_suite = time.perf_counter()
        verdicts = _run_suite(args, out, configs, library)
        suite_s = time.perf_counter() - t_suite
        rc = ours.wait()
        ours_s = time.perf_counter() - t_ours
    if rc != 0:
        raise _Stop(f"our run ended {rc}: see {out / 'ours.log'}", code=1)
    return verdicts, {"total_s": round(time.perf_counter() - t0, 1), "suite_s": round(suite_s, 1),
                      "ours_s": round(ours_s, 1)}


def _our_cells(ours_dir: Path) -> tuple[list, str]:
    """Our run's cells -> (cells, "" or a note that it has not finished: its journal so far)."""
    from harness.runfolder import RunFolder

    if (ours_dir / "matrix.json").is_file():
        return RunFolder(ours_dir).cells(), ""
    from harness.record import CellResult
    from harness.run import journal

    cells = [CellResult.from_row(r) for r in journal.read(ours_dir / "journal.jsonl").rows]
    return cells, f"ours: {len(cells)} cells so far"


def _write_table(args, out: Path, configs, entries, verdicts, timing: dict, partial: str) -> None:
    """The side-by-side (OUT/etsuite.*), its summary, and --cases-out."""
    from harness.results import etsuite as table

    cells, ours_partial = _our_cells(out / "ours")
    if ours_partial:
        partial = f"{partial or 'PARTIAL (the run has not finished)'}; {ours_partial}"
    rows = table.side_by_side(configs, verdicts, cells, {f: FLOWS[f] for f in args.flows})
    if partial:  # only the configurations both sides have finished
        rows = [r for r in rows if r.ours_stock]
        timing = {**timing, "note": partial}
    table.write(out, rows, timing)
    print(table.summary_text(rows, timing))
    if args.cases_out:
        corpus = table.corpus_with_expectations(entries, cells, rows)
        Path(args.cases_out).write_text(json.dumps(corpus, indent=1) + "\n")


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    out = Path(args.out)
    try:
        _check_arguments(args, out)
        library = _vulkan_library(args.vulkan_runtime)
        configs = _configurations(args)
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        entries = corpus_entries(configs, args.flows)
        if args.table_only:
            verdicts, timing, partial = _read_back(out, configs, args.flows)
        else:
            (verdicts, timing), partial = _run_both(args, out, configs, entries, library, t0), ""
        _write_table(args, out, configs, entries, verdicts, timing, partial)
    except _Stop as e:
        print(f"convconf: error: {e}", file=sys.stderr)
        return e.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
