"""Filters that hide one finding hide only that one, pinned where mutation testing found the loop
loose (docs/mutation.md): a filter that stopped reading the findings after the first it hid, or
after the first it must keep, would drop every later finding of the target, a failure among them.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

from archaudit import core
from archaudit.cli import main

EXAMPLE = "gpu_example-1.0-py3-none-linux_x86_64.whl"


def check(*args: str, config: str | None = None) -> tuple[int, list[tuple[str, str]], list[str]]:
    """Exit code, (code, subject) of every finding shown, and the codes suppressed."""
    head = ["check", "-q", "--format", "json", "-o", "out.json"]
    head += ["--config", config] if config else ["--no-config"]
    rc = main([*head, *args])
    doc = json.loads(Path("out.json").read_text(encoding="utf-8"))
    shown = [(f["code"], f["subject"]) for t in doc["targets"] for f in t["findings"]]
    return rc, shown, [f["code"] for f in doc["suppressed"]]


def write_config(path: Path, code: str, library: str) -> str:
    path.write_text(
        f'[tool.archaudit]\ncuda-archs = "80;90;100"\n[[tool.archaudit.ignore-library]]\n'
        f'code = "{code}"\nlibrary = "{library}"\nreason = "pinned by a test"\n',
        encoding="utf-8",
    )
    return str(path)


def test_ignore_library_hides_its_finding_and_keeps_every_later_one(scratch):
    """The example wheel under 80;90;100: libkernels.so's G002 (JIT-only 100) comes before
    libshim.so's G001. Ignoring the G002 must leave the G001, and the run fails."""
    rc, shown, _ = check("--arch", "80,90,100", EXAMPLE)
    order = [c for c, _ in shown]
    assert rc == 1 and order.index("G002") < order.index("G001"), shown
    cfg = write_config(scratch / "ignore.toml", "G002", "libkernels.so")
    rc, shown, suppressed = check(EXAMPLE, config=cfg)
    assert suppressed == ["G002"]
    assert rc == 1 and ("G001", "gpu_example/libshim.so") in shown, shown


def test_a_finding_no_filter_hides_does_not_end_the_target(scratch):
    """An unreadable member (E010, never hidden) sorts before libshim.so: its G001 must still be
    reported after it."""
    shutil.copy(core.example_wheel(), scratch / "b-1.0-py3-none-linux_x86_64.whl")
    with zipfile.ZipFile(scratch / "b-1.0-py3-none-linux_x86_64.whl", "a") as z:
        z.writestr("gpu_example/libbroken.so", b"INPUT(-lfoo)\n")
    rc, shown, _ = check("--arch", "80,90", "b-1.0-py3-none-linux_x86_64.whl")
    order = [c for c, _ in shown]
    assert rc == 1 and "E010" in order and "G001" in order and order.index("E010") < order.index("G001"), shown


def test_ignore_library_matches_the_file_name_of_a_deeply_nested_library(scratch):
    """`library = "libshim.so"` names the file wherever the wheel puts it (pkg/lib/libshim.so),
    not only one directory down."""
    nested = scratch / "n-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(core.example_wheel()) as src, zipfile.ZipFile(nested, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename.replace("gpu_example/lib", "gpu_example/_native/lib/lib"), src.read(info))
    cfg = write_config(scratch / "ignore.toml", "G001", "libshim.so")
    rc, shown, suppressed = check(nested.name, config=cfg)
    assert suppressed == ["G001"] and rc == 0, shown
