"""archaudit's own installation, held before a smoke run and checked (and put back) after it.

The wheel under test runs its code in smoke's children (dlopen, `import torch`, a .pth file
during the install) as the same user as archaudit, so it can write whatever archaudit's user
can: archaudit's package, its data tables, a `.pth` file in the site-packages archaudit runs
from. A verdict must not rest on files the wheel could have changed, and a later run must not
either. So, before the first child starts:

- every file of archaudit's package (code, `data/*.json`, the compiled speedups), every file of
  every module archaudit's process has loaded (its dependencies, the standard library modules)
  and every top-level entry of each site-packages directory of archaudit's interpreter (the
  user site included: where a `.pth` or `sitecustomize` would run at the next start) is read
  into memory (`snapshot`);
- after the last child has ended, `verify` compares the disk against it, names every file that
  changed, appeared or went away, and puts each back as it was (an added file or directory is
  removed, a changed or removed file is written back from the bytes held);
- the runner turns any change into a FAIL row (exit 1), so a run during which archaudit was
  changed never passes, and the next run starts from archaudit's own files.

The process that writes the verdict imports nothing after the children start: `preload` imports
every module a smoke report's renderers use, and renders a report in every format once, so the
code that writes the verdict is the code that was in memory before the wheel's code ran.
"""

from __future__ import annotations

import os
import shutil
import site
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

PACKAGE = os.path.dirname(os.path.abspath(__file__ + "/.."))  # archaudit's package directory
MAX_HELD = 512 << 20  # bytes of files held at most; a file beyond is hashed only (changed: named, not restored)


@dataclass(frozen=True)
class Entry:
    """One file as it was: its bytes (None for a directory, or a file too big to hold) and mode."""

    data: bytes | None
    mode: int
    digest: str = ""


@dataclass(frozen=True)
class Snapshot:
    files: dict[str, Entry]  # absolute path -> what it held
    trees: tuple[str, ...]  # directories walked whole: a file added anywhere under them is a change
    tops: dict[str, frozenset[str]] = field(default_factory=dict)  # site dir -> its top-level names


@dataclass(frozen=True)
class Change:
    path: str
    what: str  # "changed", "added", "removed"
    restored: bool

    def text(self) -> str:
        return f"{self.path} {self.what} ({'restored' if self.restored else 'NOT restored'})"


def _digest(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _read(path: str, budget: list[int]) -> Entry | None:
    try:
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            return Entry(None, st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(path).encode()
            return Entry(target, st.st_mode, _digest(target))
        if not stat.S_ISREG(st.st_mode):
            return None
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    keep = budget[0] >= len(data)
    if keep:
        budget[0] -= len(data)
    return Entry(data if keep else None, st.st_mode, _digest(data))


def site_dirs() -> tuple[str, ...]:
    """The site-packages directories of this interpreter (the user site too, existing or not)."""
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if isinstance(user, str):
        dirs.append(user)
    out: list[str] = []
    for d in dirs:
        real = os.path.realpath(d)
        if real not in out:
            out.append(real)
    return tuple(out)


def _module_files() -> Iterable[str]:
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and os.path.isfile(path):
            yield os.path.realpath(path)


def snapshot(package: str = PACKAGE, sites: tuple[str, ...] | None = None) -> Snapshot:
    """archaudit's files as they are now (see the module's docstring)."""
    budget = [MAX_HELD]
    files: dict[str, Entry] = {}
    package = os.path.realpath(package)
    for dirpath, dirnames, filenames in os.walk(package):
        dirnames.sort()
        for name in dirnames + sorted(filenames):
            path = os.path.join(dirpath, name)
            entry = _read(path, budget)
            if entry is not None:
                files[path] = entry
    for path in _module_files():
        if path not in files:
            entry = _read(path, budget)
            if entry is not None:
                files[path] = entry
    tops: dict[str, frozenset[str]] = {}
    for d in site_dirs() if sites is None else sites:
        try:
            names = os.listdir(d)
        except OSError:
            names = []
        tops[d] = frozenset(names)
        for name in names:
            path = os.path.join(d, name)
            if path not in files:
                entry = _read(path, budget)
                if entry is not None:
                    files[path] = entry
    return Snapshot(files, (package,), tops)


def _remove(path: str) -> bool:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except OSError:
        return False
    return True


def _put_back(path: str, entry: Entry) -> bool:
    """Write a file back as it was; False when it cannot be (too big to have been held, or unwritable)."""
    if entry.data is None and not stat.S_ISDIR(entry.mode):
        return False
    try:
        if os.path.lexists(path) and (os.path.isdir(path) != stat.S_ISDIR(entry.mode) or os.path.islink(path)):
            _remove(path)
        if stat.S_ISDIR(entry.mode):
            os.makedirs(path, exist_ok=True)
        elif stat.S_ISLNK(entry.mode):
            assert entry.data is not None
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.symlink(entry.data.decode(), path)
        else:
            assert entry.data is not None
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.archaudit-restore"
            with open(tmp, "wb") as f:
                f.write(entry.data)
            os.chmod(tmp, stat.S_IMODE(entry.mode))
            os.replace(tmp, path)
    except OSError:
        return False
    return True


def _same(path: str, entry: Entry) -> bool:
    now = _read(path, [0])  # hash only
    if now is None:
        return False
    if stat.S_ISDIR(entry.mode) or stat.S_ISDIR(now.mode):
        return stat.S_ISDIR(entry.mode) == stat.S_ISDIR(now.mode)
    return now.digest == entry.digest and stat.S_IFMT(now.mode) == stat.S_IFMT(entry.mode)


def _added(snap: Snapshot) -> list[str]:
    added: list[str] = []
    for tree in snap.trees:
        for dirpath, dirnames, filenames in os.walk(tree):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                path = os.path.join(dirpath, name)
                if path not in snap.files and not any(path.startswith(a + os.sep) for a in added):
                    added.append(path)
    for d, names in snap.tops.items():
        try:
            now = os.listdir(d)
        except OSError:
            continue
        added += [os.path.join(d, n) for n in sorted(set(now) - names) if os.path.join(d, n) not in added]
    return added


def _bytecode(path: str) -> bool:
    return os.path.basename(path) == "__pycache__" or path.endswith(".pyc")


def verify(snap: Snapshot, restore: bool = True) -> tuple[Change, ...]:
    """What differs from the snapshot, each put back as it was when restore (and possible).

    Bytecode the interpreter caches (`__pycache__`, `.pyc`) that appeared is removed, not
    reported: any import may write it, and a planted one would run at the next start."""
    changes: list[Change] = []
    for path, entry in sorted(snap.files.items()):
        if _same(path, entry):
            continue
        what = "changed" if os.path.lexists(path) else "removed"
        changes.append(Change(path, what, restore and _put_back(path, entry)))
    for path in _added(snap):
        if _bytecode(path):
            if restore:
                _remove(path)
            continue
        changes.append(Change(path, "added", restore and _remove(path)))
    return tuple(changes)


def describe(changes: tuple[Change, ...], limit: int = 20) -> str:
    """One line naming what changed (the first `limit`, and how many more)."""
    shown = "; ".join(c.text() for c in changes[:limit])
    more = f"; and {len(changes) - limit} more" if len(changes) > limit else ""
    return shown + more


def preload(formats: Iterable[str] = ()) -> None:
    """Import everything the smoke report's renderers use, and render a report in each format
    once, so nothing is imported (read from disk) after the wheel's code has run."""
    import importlib
    import pkgutil

    from .. import report as report_pkg

    for mod in pkgutil.iter_modules(report_pkg.__path__):
        if mod.name in ("index_html",):  # matplotlib plots of the index: never part of a smoke report
            continue
        importlib.import_module(f"{report_pkg.__name__}.{mod.name}")
    from ..config import FORMATS
    from ..report.smoke import render
    from ..report.view import RenderOptions
    from .report import FAIL, Row, SmokeReport

    sample = SmokeReport(
        target="t.whl",
        distribution="d",
        version="1",
        environment="e",
        python="3",
        gpus=(),
        gpu_error="none",
        driver=None,
        require_gpu=True,
        timeout=1.0,
        rows=(Row("integrity", "archaudit", FAIL, "x", 0.0),),
        resources=(("seconds", 0.0),),
    )
    for fmt in tuple(formats) or FORMATS:
        render(sample, fmt, RenderOptions())


__all__ = [
    "Change",
    "describe",
    "Entry",
    "MAX_HELD",
    "PACKAGE",
    "preload",
    "site_dirs",
    "snapshot",
    "Snapshot",
    "verify",
]
