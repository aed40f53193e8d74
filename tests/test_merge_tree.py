"""``harness merge`` refuses shards of one run made at two ExecuTorch trees (run.json's
``executorch_tree``: commit, dirty, Python and Vulkan digests), in one line, exit 2, nothing
written; the same tree at another path (another machine) merges."""

import pytest

from harness.cli import main
from harness.run import merge
from harness.runfolder import RunFolder

TREE = {"path": "/a/executorch", "commit": "cff6f4dd32e6" + "0" * 28, "dirty": False,
        "python_digest": "p1", "vulkan_digest": "v1", "vulkan_plugin": "/a/lib.so",
        "label": "cff6f4dd32e6"}


def shard(root, k, tree):
    folder = RunFolder(root / f"s{k}")
    folder.path.mkdir(parents=True)
    folder.write_header({"versions": {"executorch": "1.5.1", "torch": "2.13.0"},
                         "backends": ["xnnpack"], "fixes": [], "profile": "ci", "seed": 3,
                         "max_examples": 0, "shard": f"{k}/2", "executorch_tree": tree})
    (root / f"s{k}" / "cases.json").write_text("[]\n")
    return root / f"s{k}"


@pytest.mark.parametrize("change, word", [({"commit": "e4d02f41f790" + "0" * 28}, "commit"),
                                          ({"dirty": True}, "dirty"),
                                          ({"python_digest": "p2"}, "python_digest"),
                                          ({"vulkan_digest": "v2"}, "vulkan_digest"),
                                          (None, "executorch_tree")])
def test_shards_at_two_trees_do_not_merge(tmp_path, capsys, change, word):
    other = None if change is None else {**TREE, **change}
    dirs = [shard(tmp_path, 1, TREE), shard(tmp_path, 2, other)]
    code = main(["merge", *map(str, dirs), "--out", str(tmp_path / "merged")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2
    assert len(err) == 1 and err[0].startswith("convconf: error: "), err
    assert word in err[0] and "differs from" in err[0], err[0]
    assert not (tmp_path / "merged").exists()


def test_the_same_tree_elsewhere_is_one_run(tmp_path):
    moved = {**TREE, "path": "/b/elsewhere/executorch", "vulkan_plugin": "/b/lib.so"}
    headers = merge.check([shard(tmp_path, 1, TREE), shard(tmp_path, 2, moved)])
    assert [h.shard for h in headers] == ["1/2", "2/2"]
