"""Two runs' matrices -> which cells regressed, got fixed or changed (for CI and git bisect)."""

from __future__ import annotations

import pandas as pd

KEY = ["case_id", "backend", "fixes"]


def diff(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    both = old[KEY + ["status"]].merge(new[KEY + ["status", "message"]], on=KEY, how="outer",
                                       suffixes=("_old", "_new"), indicator=True)

    def kind(r) -> str:
        if r["_merge"] == "left_only":
            return "removed"
        if r["_merge"] == "right_only":
            return "added"
        if r["status_old"] == r["status_new"]:
            return "same"
        if r["status_old"] == "PASS":
            return "regressed"
        if r["status_new"] == "PASS":
            return "fixed"
        return "changed"

    both["change"] = both.apply(kind, axis=1)
    both = both.drop(columns="_merge").rename(columns={"status_old": "old", "status_new": "new"})
    order = {"regressed": 0, "fixed": 1, "changed": 2, "added": 3, "removed": 4, "same": 5}
    return both.sort_values(by=["change", *KEY], key=lambda s: s.map(order) if s.name == "change"
                            else s).reset_index(drop=True)
