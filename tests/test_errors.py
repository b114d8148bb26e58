"""Every error archaudit raises on purpose derives from one base, carrying the finding code it
stands for; the CLI turns any of them into exit 2 with one line."""

from __future__ import annotations

import pytest

from archaudit import config
from archaudit.errors import ArchauditError, UsageError
from archaudit.findings import Code
from archaudit.read import elf, fatbin, hip, pe, zipread
from archaudit.smoke import runner, venv


@pytest.mark.parametrize(
    "cls",
    [
        elf.ElfError,
        zipread.ZipError,
        zipread.MemberError,
        hip.Malformed,
        fatbin.FatbinError,
        pe.PeError,
        config.ConfigError,
        UsageError,
        venv.InstallError,
        runner.SmokeInputError,
    ],
)
def test_every_error_derives_from_the_base(cls):
    assert issubclass(cls, ArchauditError)


def test_readers_errors_carry_their_code():
    assert elf.ElfError("not an ELF file").code == "E010"
    assert elf.ElfError("32-bit", code=Code.E020).code == "E020"
    assert zipread.ZipError("central directory not found").code == "E002"
    assert zipread.MemberError("listed twice", code=Code.E003).code == "E003"
    e = fatbin.FatbinError("entry overruns its container", code=Code.E011, offset=0x4A0)
    assert (e.code, e.message, e.offset, str(e)) == (
        "E011",
        "entry overruns its container",
        0x4A0,
        "entry overruns its container",
    )
    assert str(hip.Malformed("bundle is truncated", code=Code.E030)) == "E030: bundle is truncated"
