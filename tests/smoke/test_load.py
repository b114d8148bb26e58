"""The load probe (archaudit.smoke.load): the ELF facts archaudit reads for each library, the files
it judges without a dlopen, and the dlopen in a fresh child per library, on the gcc-built fixture
wheels (tests/fixtures/smoke/build.sh) and the nvcc-built fixtures."""

from __future__ import annotations

import os
import platform
import shutil
import zipfile
from pathlib import Path

from archaudit.smoke.context import ET_DYN
from archaudit.smoke.load import LoadProbe, load_item, load_precheck
from archaudit.smoke.report import FAIL, PASS, SKIP
from helpers import CUDA_BIN, readelf_dynamic
from reference_tools import needs_tool
from smoke_helpers import probe_context

WHEELS = Path(__file__).parents[1] / "fixtures" / "smoke" / "wheels"


def unpacked(tmp_path: Path, *names: str) -> Path:
    """The fixture wheels' files, as an installer lays them out in site-packages."""
    site = tmp_path / "site"
    for name in names:
        with zipfile.ZipFile(WHEELS / f"{name}-1.0-py3-none-linux_x86_64.whl") as z:
            z.extractall(site)
    return site


def here() -> str:
    m = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m.lower(), m)


@needs_tool("readelf (apt-get install binutils)", shutil.which("readelf"))
def test_the_elf_facts_are_readelfs(tmp_path):
    site = unpacked(tmp_path, "smoke_ok", "smoke_missing")
    for lib in (site / "smoke_ok" / "libsmoke_runpath.so", site / "smoke_missing" / "libsmoke_missing.so"):
        info = load_item(str(lib))["elf"]
        want = readelf_dynamic(lib)
        assert (info["needed"], info["runpath"], info["rpath"]) == (want["NEEDED"], want["RUNPATH"], want["RPATH"])
        assert (info["soname"], info["type"], info["inspected"]) == (
            want["SONAME"][0] if want["SONAME"] else None,
            ET_DYN,
            True,
        )
    assert load_item(str(site / "smoke_ok" / "libsmoke_runpath.so"))["elf"]["runpath"] == [
        "$ORIGIN/../smoke_ok_missing_dir"
    ]


def test_files_no_dlopen_is_needed_to_judge_are_judged_by_their_facts(tmp_path):
    def pre(path: Path) -> tuple[str, str] | None:
        return load_precheck(load_item(str(path)))

    assert pre(CUDA_BIN / "lib_sm80.so") is None  # a shared object for this machine: dlopen it
    assert pre(CUDA_BIN / "kern_80.ptx") == (SKIP, "not an ELF file (a linker script or data named like a library)")
    assert pre(CUDA_BIN / "kern.o") == (SKIP, "ELF type 1 is not a shared object; nothing to dlopen")
    status, reason = pre(tmp_path) or ("", "")
    assert status == FAIL and reason.startswith("cannot read: IsADirectoryError")
    # another class (32-bit): not inspected here, so the loader says what is wrong with it
    assert load_item(str(CUDA_BIN / "elf32" / "libhost32.so"))["elf"]["inspected"] is False
    assert pre(CUDA_BIN / "elf32" / "libhost32.so") is None
    other = "riscv" if here() != "riscv" else "aarch64"
    machine = {"riscv": 243, "aarch64": 183}[other]
    data = bytearray((CUDA_BIN / "lib_sm80.so").read_bytes())
    data[18:20] = machine.to_bytes(2, "little")  # e_machine
    foreign = tmp_path / "libforeign.so"
    foreign.write_bytes(bytes(data))
    assert pre(foreign) == (SKIP, f"built for {other}, this machine is {here()}")


def test_each_library_is_dlopened_in_a_child_and_a_failure_names_its_cause(tmp_path):
    """End to end in children of this interpreter: the clean library passes, the dangling RUNPATH
    is a warning, the missing dependency and the undefined symbol are named."""
    site = unpacked(tmp_path, "smoke_ok", "smoke_missing", "smoke_undef")
    files = tuple(sorted(str(p) for p in site.rglob("*") if p.is_file()))
    c = probe_context(tmp_path, distribution="smoke_ok", location=str(site), files=files, child_env=dict(os.environ))
    rows = {r.subject: r for r in LoadProbe().run(c)}
    assert sorted(rows) == [
        "smoke_missing/libsmoke_missing.so",
        "smoke_ok/libsmoke_ok.so",
        "smoke_ok/libsmoke_runpath.so",
        "smoke_undef/libsmoke_undef.so",
    ]
    ok, runpath = rows["smoke_ok/libsmoke_ok.so"], rows["smoke_ok/libsmoke_runpath.so"]
    needed = load_item(str(site / "smoke_ok" / "libsmoke_ok.so"))["elf"]["needed"]
    assert (
        ok.status == PASS and ok.reason == f"dlopen(RTLD_NOW) loaded it with every symbol bound ({len(needed)} NEEDED)"
    )
    assert runpath.status == PASS and "warning: RUNPATH $ORIGIN/../smoke_ok_missing_dir" in runpath.reason
    missing = rows["smoke_missing/libsmoke_missing.so"]
    assert missing.status == FAIL and "missing dependencies: libsmoke_absent.so.1" in missing.reason
    assert dict(missing.details)["missing"] == ["libsmoke_absent.so.1"]
    undef = rows["smoke_undef/libsmoke_undef.so"]
    assert undef.status == FAIL and "undefined symbol: " in undef.reason
    (none,) = LoadProbe().run(probe_context(tmp_path, distribution="empty"))
    assert (none.status, none.reason) == (SKIP, "the distribution ships no shared library")
