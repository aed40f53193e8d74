"""Before a known issue says "not reported upstream", the tracker was searched (issue 47): every
entry of the shipped file that says so (no upstream thread, or a note that says it) records its
searches, each with its date, query and result (none, or the thread's address)."""

import re

from harness.results import known_issues

NOT_REPORTED = re.compile(r"not reported upstream", re.I)


def test_every_entry_that_says_not_reported_records_its_search():
    entries = known_issues.load()
    unreported = [e for e in entries if not e.upstream or NOT_REPORTED.search(e.note)]
    assert len(unreported) >= 6  # the file has such entries (this test is not vacuous)
    missing = [e.id for e in unreported if not e.searched]
    assert missing == []
    searches = [s for e in unreported for s in e.searched]
    assert all(s["query"].strip() and re.fullmatch(r"\d{4}-\d{2}-\d{2}", s["date"])
               for s in searches)
    assert all(s["result"] == "none" or s["result"].startswith("https://github.com/")
               for s in searches)
