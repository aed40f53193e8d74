"""Two runs' matrices -> which cells regressed, got fixed or changed (for CI and git bisect)."""

from __future__ import annotations

import pandas as pd

from harness.status import EXECUTED, Status

KEY = ["case_id", "backend", "fixes"]
# The kinds of change between two runs' cells, most urgent first (the order of diff's rows).
CHANGES = ("regressed", "fixed", "changed", "delegation", "unexecuted", "added", "removed", "same")


def run_label(run_dir) -> str:
    """What a run judged: 'executorch 1.5.1', or at a tree 'executorch cff6f4dd32e6 (dirty) over
    1.5.1' (``harness run --executorch``/``--executorch-tree``); '?' for an unreadable header."""
    from harness.runfolder import RunFolder

    try:
        return RunFolder(run_dir).header().executorch_label
    except ValueError:
        return "?"


def lanes(old: pd.DataFrame, new: pd.DataFrame, old_lane: str, new_lane: str):
    """Lane OLD_LANE of one matrix against lane NEW_LANE of another (or the same) matrix, e.g.
    ``vulkan`` (lavapipe) against ``vulkan@h200``: both are relabelled ``OLD_LANE vs NEW_LANE`` so
    that ``diff`` pairs them by case and fix set."""
    for df, lane in ((old, old_lane), (new, new_lane)):
        if not (df["backend"] == lane).any():
            raise ValueError(f"--lanes: no cells of lane {lane!r} (there are: "
                             f"{', '.join(sorted(df['backend'].unique()))})")
    label = f"{old_lane} vs {new_lane}"
    old, new = (df[df["backend"] == lane].assign(backend=label)
                for df, lane in ((old, old_lane), (new, new_lane)))
    # A device lane holds only the cells a bundle carried (those with a program to run); cells
    # that stopped before execution in one lane are not a difference between devices.
    both = old[KEY].merge(new[KEY])
    unpaired = len(old) + len(new) - 2 * len(both)
    return old.merge(both), new.merge(both), unpaired


def _one_side_unexecuted(old, new) -> bool:
    """One side executed, the other had no runtime for the lane (NO_RUNTIME, or a
    CONTRACT_VIOLATION, which is only final without a runtime): neither a fix nor a regression."""
    executed = {s.value for s in EXECUTED}
    no_runtime = {Status.NO_RUNTIME, Status.CONTRACT_VIOLATION}
    return (old in no_runtime and new in executed) or (new in no_runtime and old in executed)


def _known(value) -> bool:
    return isinstance(value, str)  # a matrix written before the column existed reads NaN


def diff(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    # max|d| on both sides: two lanes or releases that both PASS (or both MISMATCH) can still
    # compute different numbers, and a reader comparing devices wants to see that.
    err = ["max_abs_error"] if "max_abs_error" in old and "max_abs_error" in new else []
    # How much went to the delegate, beside the status: the same status with more or less of
    # the program delegated is a change a release made.
    err += ["delegation"] if "delegation" in old and "delegation" in new else []
    # The message of each side: what a release said before and after a change is the clue.
    both = old[KEY + ["status", "message"] + err].merge(new[KEY + ["status", "message"] + err],
                                                        on=KEY, how="outer",
                                                        suffixes=("_old", "_new"), indicator=True)

    def kind(r) -> str:
        if r["_merge"] == "left_only":
            return "removed"
        if r["_merge"] == "right_only":
            return "added"
        if r["status_old"] == r["status_new"]:
            moved = "delegation_old" in r and r["delegation_old"] != r["delegation_new"] and \
                _known(r["delegation_old"]) and _known(r["delegation_new"])
            return "delegation" if moved else "same"
        if _one_side_unexecuted(r["status_old"], r["status_new"]):
            return "unexecuted"
        if r["status_old"] == Status.PASS:
            return "regressed"
        if r["status_new"] == Status.PASS:
            return "fixed"
        return "changed"

    both["change"] = both.apply(kind, axis=1)
    both = both.drop(columns="_merge").rename(columns={"status_old": "old", "status_new": "new"})
    order = {change: i for i, change in enumerate(CHANGES)}
    return both.sort_values(by=["change", *KEY], key=lambda s: s.map(order) if s.name == "change"
                            else s).reset_index(drop=True)
