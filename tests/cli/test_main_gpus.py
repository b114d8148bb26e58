"""`archaudit gpus`: the NVIDIA and AMD catalogs the --gpu names come from, as a table and as JSON."""

from __future__ import annotations

import json
import re

from archaudit.cli import main


def test_gpus_catalog(capsys):
    assert main(["gpus"]) == 0
    text = capsys.readouterr().out
    for name in ("A100", "H100", "H200", "B200", "RTX 4090", "RTX 5090", "Jetson Orin", "Jetson Thor", "GB10"):
        assert name in text, name
    assert main(["gpus", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    by = {r["name"]: r for r in rows}
    assert by["H100"]["cc"] == "9.0" and by["H100"]["kind"] == "discrete"
    assert any("Orin" in n and r["kind"] == "integrated" for n, r in by.items())
    assert all(re.fullmatch(r"\d+\.\d", r["cc"]) for r in rows if r["vendor"] == "nvidia")
    amd = {r["name"]: r for r in rows if r["vendor"] == "amd"}
    assert amd["Instinct MI300X"]["target"] == "gfx942" and "Radeon RX 9070 XT" in text
