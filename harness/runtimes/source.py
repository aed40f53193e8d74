"""Which ExecuTorch source a runtime plug-in is built from, in this order:

1. ``--source DIR|TARBALL`` (a source tree, one tarball, or a folder of tarballs);
2. ``$CONVCONF_EXECUTORCH_SRC`` (same forms);
3. a shallow git fetch of the wheel's own commit (``executorch.version.git_version``) from the
   repository the wheel's metadata names.

A tarball or tree holds, at its root, ``backends/vulkan/...``, ``ET_COMMIT`` and ``version.txt``
(the layout of ``shared/executorch-src``). Among several, the one at the wheel's own commit wins;
otherwise the release with the wheel's version, else the newest of the same minor release. A
source that is not the wheel's own commit is *skew*, recorded in the manifest and the run header.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.runtimes import RuntimeBuildError
from harness.runtimes.wheel import Wheel

ENV = "CONVCONF_EXECUTORCH_SRC"
# What the plug-in build compiles; all a git fetch needs to bring.
NEEDED = ("backends/vulkan/runtime", "backends/vulkan/serialization/schema.fbs")


@dataclass(frozen=True)
class Source:
    origin: str          # the path or URL it came from
    commit: str
    version_txt: str
    commit_date: str = ""
    tarball: Path | None = None
    tree: Path | None = None
    digest: str = ""     # sha256 of the tarball (or of the tree's commit): part of the build key

    def exact_for(self, wheel: Wheel) -> bool:
        return bool(wheel.git_version) and self.commit == wheel.git_version

    def skew_note(self, wheel: Wheel) -> str:
        if self.exact_for(wheel):
            return ""
        return (f"runtime source {self.commit[:12]} (version.txt {self.version_txt}"
                f"{', ' + self.commit_date if self.commit_date else ''}) is not the wheel's own "
                f"commit {wheel.git_version[:12] or '?'} (executorch {wheel.version}): a runtime "
                f"result may come from that skew")

    def extract(self, dest: Path) -> Path:
        """Lay the source out as ``dest/executorch/...`` (so <executorch/...> includes resolve)."""
        root = dest / "executorch"
        shutil.rmtree(dest, ignore_errors=True)
        root.mkdir(parents=True)
        if self.tarball:
            with tarfile.open(self.tarball) as tf:
                tf.extractall(root, filter="data")
        else:
            for rel in NEEDED:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                copy = shutil.copytree if (self.tree / rel).is_dir() else shutil.copy2
                copy(self.tree / rel, root / rel)
        return dest


def _read_member(tf: tarfile.TarFile, name: str) -> str:
    for candidate in (name, f"./{name}"):
        try:
            fh = tf.extractfile(candidate)
        except KeyError:
            continue
        if fh:
            return fh.read().decode().strip()
    return ""


def _from_tarball(path: Path) -> Source:
    try:
        with tarfile.open(path) as tf:
            commit = _read_member(tf, "ET_COMMIT")
            found = tf.getnames()
            info = (_read_member(tf, "version.txt"), _read_member(tf, "ET_COMMIT_DATE"))
    except (OSError, tarfile.TarError) as e:
        raise RuntimeBuildError(f"{path}: not a readable source tarball ({e})") from None
    if not commit or not any(n.lstrip("./").startswith(NEEDED[0]) for n in found):
        raise RuntimeBuildError(f"{path}: not an ExecuTorch source tarball (needs ET_COMMIT and "
                                f"{NEEDED[0]}/)")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Source(str(path), commit, info[0], info[1], tarball=path, digest=digest)


def _from_tree(path: Path) -> Source:
    if not (path / NEEDED[0]).is_dir():
        raise RuntimeBuildError(f"{path}: no {NEEDED[0]}/ in this source tree")
    commit = (path / "ET_COMMIT").read_text().strip() if (path / "ET_COMMIT").exists() else ""
    if not commit and (path / ".git").exists():
        commit = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], text=True,
                                capture_output=True).stdout.strip()
    if not commit:
        raise RuntimeBuildError(f"{path}: cannot tell the source's commit (no ET_COMMIT, no .git)")
    version_txt = (path / "version.txt").read_text().strip() if (path / "version.txt").exists() else ""
    date = (path / "ET_COMMIT_DATE").read_text().strip() if (path / "ET_COMMIT_DATE").exists() else ""
    return Source(str(path), commit, version_txt, date, tree=path,
                  digest=hashlib.sha256(f"tree:{path.resolve()}:{commit}".encode()).hexdigest())


def _minor(v: str) -> tuple:
    parts = [int(p) for p in v.split(".")[:3] if p.isdigit()]
    return tuple(parts[:2]), tuple(parts)


def best_for(candidates: list[Source], wheel: Wheel, where: str) -> Source:
    exact = [s for s in candidates if s.exact_for(wheel)]
    if exact:
        return exact[0]
    same = [s for s in candidates if s.version_txt == wheel.version]
    if same:
        return same[0]
    minor, full = _minor(wheel.version)
    near = [s for s in candidates if _minor(s.version_txt)[0] == minor]
    if near:
        return max(near, key=lambda s: _minor(s.version_txt)[1])
    have = ", ".join(f"{Path(s.origin).name} ({s.version_txt})" for s in candidates) or "none"
    raise RuntimeBuildError(f"{where}: no source pairs with executorch {wheel.version} "
                            f"(commit {wheel.git_version[:12]}); found: {have}")


def from_path(path: Path, wheel: Wheel) -> Source:
    if not path.exists():
        raise RuntimeBuildError(f"{path}: no such file or folder")
    if path.is_file():
        return _from_tarball(path)
    if (path / NEEDED[0]).is_dir():
        return _from_tree(path)
    tarballs = sorted(path.glob("*.tar.gz")) + sorted(path.glob("*.tgz"))
    if not tarballs:
        raise RuntimeBuildError(f"{path}: neither a source tree nor a folder of source tarballs")
    return best_for([_from_tarball(t) for t in tarballs], wheel, str(path))


def git_fetch(wheel: Wheel, dest: Path, timeout: float = 180) -> Source:
    """Shallow fetch of the wheel's own commit; RuntimeBuildError saying why when it fails."""
    if not wheel.git_version or not wheel.repository:
        raise RuntimeBuildError("the wheel names no commit or repository to fetch")
    if not shutil.which("git"):
        raise RuntimeBuildError("git is not installed")
    tmp = Path(tempfile.mkdtemp(prefix="et-src-"))
    try:
        env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
        for cmd in (["git", "init", "-q"],
                    ["git", "fetch", "-q", "--depth", "1", wheel.repository, wheel.git_version],
                    ["git", "checkout", "-q", "FETCH_HEAD", "--", *NEEDED, "version.txt"]):
            done = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True,
                                  timeout=timeout)
            if done.returncode:
                last = (done.stderr.strip().splitlines() or ["exit %d" % done.returncode])[-1]
                raise RuntimeBuildError(f"git fetch of {wheel.git_version[:12]} from "
                                        f"{wheel.repository} failed: {last}")
        (tmp / "ET_COMMIT").write_text(wheel.git_version + "\n")
        shutil.rmtree(tmp / ".git", ignore_errors=True)
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(tmp), dest)
    except subprocess.TimeoutExpired:
        raise RuntimeBuildError(f"git fetch from {wheel.repository} timed out after "
                                f"{timeout:g} s") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _from_tree(dest)


# This project's machines and CI keep the sources in ``shared/executorch-src`` beside the
# checkout; from an editable install that is two folders above this package.
BESIDE_CHECKOUT = Path(__file__).resolve().parents[3] / "shared" / "executorch-src"


def locate(commit: str, digest: str = "", fetch_root: Path | None = None) -> Source | None:
    """A source at ``commit`` wherever it is now: ``$CONVCONF_EXECUTORCH_SRC``,
    ``shared/executorch-src`` beside this checkout, or an earlier git fetch under
    ``fetch_root``; one whose ``digest`` matches is preferred. None when none is found. How a
    cache entry made before entries carried their source finds it again, never by the path
    it was built from."""
    places = [Path(os.environ[ENV])] if os.environ.get(ENV) else []
    places.append(BESIDE_CHECKOUT)
    if fetch_root is not None and fetch_root.is_dir():
        places += sorted(p for p in fetch_root.iterdir() if p.is_dir())
    found = []
    for place in places:
        if place.is_dir() and (place / NEEDED[0]).is_dir():
            readers = [(_from_tree, place)]
        elif place.is_dir():
            readers = [(_from_tarball, f) for f in sorted(place.glob("*.tar.gz"))
                       + sorted(place.glob("*.tgz"))]
        else:
            readers = [(_from_tarball, place)] if place.is_file() else []
        for read, path in readers:
            try:
                src = read(path)
            except (RuntimeBuildError, OSError):
                continue
            if src.commit == commit:
                found.append(src)
    same = [s for s in found if digest and s.digest == digest]
    return (same or found or [None])[0]


def resolve(explicit: str | None, wheel: Wheel, fetch_dir: Path) -> Source:
    """--source, else $CONVCONF_EXECUTORCH_SRC, else shared/executorch-src beside the checkout,
    else a shallow git fetch of the wheel's own commit."""
    if explicit:
        return from_path(Path(explicit), wheel)
    if os.environ.get(ENV):
        return from_path(Path(os.environ[ENV]), wheel)
    if BESIDE_CHECKOUT.is_dir():
        return from_path(BESIDE_CHECKOUT, wheel)
    try:
        return git_fetch(wheel, fetch_dir)
    except RuntimeBuildError as e:
        raise RuntimeBuildError(f"no ExecuTorch source for the runtime: --source not given, ${ENV} "
                                f"not set, no {BESIDE_CHECKOUT}, and {e}") from None
