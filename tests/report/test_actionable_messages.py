"""Findings one can act on (issue 39, issue 35 item 2): every finding says its verdict (which claimed
or asked GPU, what fails or what is unverified) and its fix within its first 240 characters, the
width the default text cuts a line to; examples (kernel names, container lists, sources) follow.

Every code is produced here from the nvcc- and clang-built fixtures (tests/fixtures/*/bin), small
inputs built from them in the test, and the real wheel the fast tier already reads (cuRAND 10.4.5.25),
and each finding is read three ways: its JSON message, its SARIF result's message and its line in
the default text. The codes no input produces are NO_INPUT, each with why.

The convention every message follows, which the checks below read:
- the GPUs a finding is about (its data's `missing`, `fails`, `gpus`, `gpu`, `jit`, `extra`, `newest`,
  `serves`) are named before its fix, as a compute capability (9.0), a target (sm_90, gfx90a) or a
  GPU's name (H100);
- an error or warning carries "Fix: ", and its fix runs to the first ". " outside quotes (or to the
  end); it ends within the first 240 characters, whole;
- where a record of the project's own host gate resolves the failure, the fix is that record: the
  exact `[[tool.archaudit.library]]` or `[[tool.archaudit.ignore-library]]` entry, reason to fill in;
- an information finding says why nothing is to be done (VERDICT) within the same 240 characters.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import struct
from contextlib import redirect_stderr
from pathlib import Path

import pytest

import helpers
from archaudit.cli import main
from archaudit.core import example_wheel
from archaudit.findings import CODES, ERROR, INFO, Code

LINE = 240
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CUDA, AMD, PE = FIXTURES / "cuda" / "bin", FIXTURES / "amd" / "bin", FIXTURES / "pe" / "bin"
SMOKE = FIXTURES / "smoke" / "bin"
LOADING = AMD / "loading"
CURAND = ("nvidia-curand", "10.4.5.25", "nvidia_curand-10.4.5.25-py3-none-manylinux_2_27_x86_64.whl")

# A project's record that its host launches lib_multiobj.so's `mul` only on 8.0 (K006 on 9.0).
GATE_MUL = (
    '[tool.archaudit]\n[[tool.archaudit.library]]\npath = "lib_multiobj.so"\nkernels = ["mul"]\narch = "80"\n'
    'reason = "ops.py:7"\n'
)

# Codes no input of the fast tier produces, and why.
NO_INPUT = {
    Code.E032: "a HIP payload declaring more than --max-payload bytes: the smallest is the bound itself (GiBs), "
    "tests/read/test_hip.py builds its header alone",
    Code.E099: "an internal error: no input is meant to produce it (every one found became a reader's finding)",
    Code.C002: "an unparseable claim given on the command line is a usage error (exit 2, no report); every list "
    "that matches the pattern of torch's embedded lists (claims.embedded_claim_markers) parses",
}

# The words an information finding says why it asks nothing, within the first 240 characters.
VERDICT = {
    Code.K002: "as designed",
    Code.K003: "as designed",
    Code.K005: "its vendor",
    Code.K006: "not launched",
    Code.G016: "not supported",
    Code.G002: "only through PTX JIT",
    Code.G005: "specialised",
    Code.G007: "not loadable",
    Code.G008: ": ",
    Code.G010: "without kernels",
    Code.D002: "needs driver",
    Code.X002: "not judged",
}
RECORD = re.compile(r'\[\[tool\.archaudit\.(?:library|ignore-library)\]\] .*?reason = "<file:line>"')


def _ptx_for_70() -> bytes:
    """kern_80.ptx as PTX ISA 9.1 for sm_70: a Volta's last driver (R580, CUDA 13.0) cannot JIT it (G012)."""
    text = (CUDA / "kern_80.ptx").read_text(encoding="utf-8")
    text = re.sub(r"^\.version \S+", ".version 9.1", text, flags=re.M)
    return re.sub(r"^\.target \S+", ".target sm_70", text, flags=re.M).encode()


def _in_read_only_data(library: bytes, text: bytes) -> bytes:
    """A library with `text` written, NUL-delimited, over the start of its .eh_frame (read-only data,
    where torch's libraries carry their architecture lists): what the reader searches for strings."""
    (shoff,) = struct.unpack_from("<Q", library, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", library, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", library, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    for name, _, _, _, offset, size in headers:
        if library[names + name : library.index(b"\0", names + name)] == b".eh_frame" and size > len(text) + 2:
            return library[:offset] + b"\0" + text + b"\0" + library[offset + len(text) + 2 :]
    raise AssertionError("no .eh_frame to write into")


def _inputs(work: Path) -> dict[str, list[str]]:
    """Each case: the arguments of `check` (targets relative to `work`, the working directory, so no
    machine path lengthens a message)."""

    def put(name: str, data: bytes) -> str:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(data)
        return name

    def fixture(path: Path, name: str | None = None) -> str:
        return put(name or path.name, path.read_bytes())

    sm80, kf = (CUDA / "lib_sm80.so").read_bytes(), (CUDA / "kern.fatbin").read_bytes()
    example = Path(example_wheel()).read_bytes()
    helpers.wheel(work / "dup-1.0-py3-none-linux_x86_64.whl", [("dup/libk.so", sm80), ("dup/libk.so", sm80)])
    helpers.wheel(work / "bare-1.0-py3-none-linux_x86_64.whl", [("bare/libk.so", sm80)], dist_info=False)
    helpers.wheel(work / "text-1.0-py3-none-linux_x86_64.whl", [("text/libk.so", b"\x7fELF" + bytes(10))])
    helpers.wheel(
        work / "data-1.0-py3-none-linux_x86_64.whl", [("data/lib/libk.so", sm80), ("data/fixtures/libk90.so", sm80)]
    )
    (work / "pyproject.toml").write_text(
        '[tool.archaudit]\n[[tool.archaudit.ignore-library]]\ncode = "G001"\nlibrary = "libgone.so"\n'
        'reason = "removed in 2.0"\n[[tool.archaudit.data]]\nmember = "data/fixtures/*"\n'
        'reason = "a test fixture nothing loads"\n',
        encoding="utf-8",
    )
    bad_ccob = helpers.ccob(helpers.PLAIN, 2, "zlib", usize=len(helpers.PLAIN) + 7)
    return {
        "G001": [fixture(CUDA / "lib_sm80.so"), "--arch", "80;90"],
        "G001 AMD": [fixture(AMD / "hip_multi.so"), "--amd-arch", "gfx90a,gfx1201"],
        "G001 AMD xnack": [fixture(LOADING / "id_gfx90a_holds_xnack_on.hipfb"), "--amd-arch", "gfx90a"],
        "G001 AMD openmp": [fixture(LOADING / "openmp_entry.hipfb"), "--amd-arch", "gfx90a"],
        "G001 AMD relocatable": [fixture(LOADING / "relocatable_entry.hipfb"), "--amd-arch", "gfx90a"],
        "G001 PTX too new": [fixture(CUDA / "floors" / "lib_ptx70.so"), "--arch", "70"],
        "G001 in a wheel": ["--example", "--arch", "80;90"],
        "K001": [fixture(CUDA / "lib_multiobj.so"), "--arch", "80;90"],
        "K001 JIT gap": [fixture(CUDA / "lib_guard_75ptx_80.so"), "--arch", "75;80;90"],
        "K001 thrust": [fixture(CUDA / "lib_thrust_layernorm.so"), "--arch", "80;90"],
        "K002": [fixture(CUDA / "lib_sm100_zero_fill_100a.so"), "--arch", "90;100"],
        "K003 named": [fixture(CUDA / "lib_archtag_sm80.so"), "--arch", "75;80"],
        "K003 compiled out": [fixture(CUDA / "lib_guard_75ptx_80.so"), "--arch", "75;80;86"],
        "K003 stated": [fixture(CUDA / "fp8_stated" / "libnccl.so.2", "fp8/libnccl.so.2"), "--arch", "80;90"],
        "K004": [fixture(CUDA / "lib_axpy_narrow_first.so"), "--arch", "80;90"],
        "K006": [fixture(CUDA / "lib_multiobj.so"), "--arch", "80;90", "--config", put("gate.toml", GATE_MUL.encode())],
        "K005 G020": [fixture(CUDA / "vendor" / "nccl_newer" / "libnccl.so.2"), "--arch", "80;90"],
        "G016 G019 claimed": [fixture(CUDA / "vendor" / "cusparselt" / "libcusparseLt.so.0"), "--arch", "75;80;90"],
        "G016 G019 asked": [fixture(CUDA / "vendor" / "cublas" / "libcublasLt.so.13"), "--gpu", "V100"],
        "G002": [fixture(CUDA / "lib_ptx90.so"), "--arch", "120"],
        "G003": [fixture(CUDA / "lib_multi.so"), "--arch", "80", "--exact"],
        "G004": [fixture(CUDA / "lib_sm80.so"), "--arch", "80", "--require-ptx", "newest"],
        "G005": [fixture(CUDA / "lib_sm90a.so"), "--arch", "90a"],
        "G006": [fixture(CUDA / "lib_host.so"), "--arch", "80"],
        "G007": [fixture(CUDA / "lib_rdc.so"), "--arch", "80"],
        "G008 G009 G011": [fixture(CUDA / "lib_sm80.so"), "--gpu", "A100", "--gpu", "H100", "--gpu", "MI300X"],
        "G009 kernel": [fixture(CUDA / "lib_zero_fill_100a.so"), "--gpu", "H100"],
        "G009 AMD": [fixture(AMD / "hip_multi.so"), "--gpu", "MI100"],
        "G010": [fixture(CUDA / "lib_empty_sm75.so"), "--arch", "75"],
        "G011 C001": [fixture(CUDA / "lib_sm80.so"), "--amd-arch", "gfx90a"],
        "G012": [put("kern_70.ptx", _ptx_for_70()), "--arch", "70"],
        "G013": [fixture(SMOKE / "rdc_ext.fatbin"), "--arch", "sm_90"],
        "G014": [fixture(LOADING / "id_gfx90a_holds_xnack_on.hipfb"), "--amd-arch", "gfx90a:xnack+"],
        "G017": [fixture(CUDA / "two_axpy_then_layernorm.fatbin"), "--arch", "80"],
        "C001": [fixture(CUDA / "lib_sm100_zero_fill_100a.so")],
        "C001 AMD": [fixture(AMD / "hip_multi.so")],
        "C003": [
            put(
                "lib_embeds.so",
                _in_read_only_data(sm80, b"-gencode;arch=compute_80,code=sm_80;-gencode;arch=compute_86,code=sm_86"),
            ),
            "--arch",
            "80;90",
        ],
        "D001 SASS": [fixture(CUDA / "lib_sm80.so"), "--arch", "80", "--driver", "470"],
        "D001 PTX": [fixture(CUDA / "lib_ptx90.so"), "--arch", "90", "--driver", "470"],
        "E001": ["missing-1.0-py3-none-linux_x86_64.whl", "--arch", "80"],
        "E002": [put("cut-1.0-py3-none-linux_x86_64.whl", example[: len(example) // 2]), "--arch", "80"],
        "E003": ["dup-1.0-py3-none-linux_x86_64.whl", "--arch", "80"],
        "E004": ["bare-1.0-py3-none-linux_x86_64.whl", "--arch", "80"],
        "E010": ["text-1.0-py3-none-linux_x86_64.whl", "--arch", "80"],
        "E011": [fixture(FIXTURES / "readers" / "bin" / "lib_appended.so"), "--arch", "80"],
        "E011 folded": [put("lib_flood.so", sm80 + kf * 7), "--arch", "80"],
        "E012": [put("zstd.fatbin", kf[:-40] + bytes(40)), "--arch", "80;90"],
        "E013": [put("kind.fatbin", kf[:16] + struct.pack("<H", 16) + kf[18:]), "--arch", "80"],
        "E014": [put("notarget.ptx", b".version 9.0\n.address_size 64\n"), "--arch", "80"],
        "E015": [fixture(CUDA / "lib_multi.so"), "--arch", "80", "--fast"],
        "E020": [put("lib_big_endian.so", sm80[:5] + b"\x02" + sm80[6:]), "--arch", "80"],
        "E021": [put("cut.dll", (PE / "sm80.dll").read_bytes()[:4096]), "--arch", "80"],
        "E030": [
            put("bundle.hipfb", helpers.PLAIN[:24] + struct.pack("<Q", 1 << 40) + helpers.PLAIN[32:]),
            "--amd-arch",
            "gfx90a",
        ],
        "E031": [put("bad.hipfb", bad_ccob), "--amd-arch", "gfx90a"],
        "E033": [fixture(PE / "hip_overlay.dll"), "--amd-arch", "gfx90a"],
        "X001 X002": ["--config", "pyproject.toml", "data-1.0-py3-none-linux_x86_64.whl", "--arch", "80"],
    }


def _real_inputs(work: Path) -> dict[str, list[str]]:
    """The real wheel the fast tier reads, asked about GPUs its vendor does and does not support."""
    from wheels import fetch

    whl = fetch(CURAND[0], CURAND[1], filename=CURAND[2])
    (work / whl.name).symlink_to(whl)
    return {
        "cuRAND claim": [whl.name, "--arch", "70;75;80;90;120"],
        "cuRAND asked": [whl.name, "--gpu", "T4", "--gpu", "V100", "--gpu", "GTX 1080"],
    }


def _check(args: list[str], fmt: str) -> str:
    """The report of `check` in one format, written to a file (as a CI step writes it)."""
    return _check_all(args, (fmt,))[0]


def _check_all(args: list[str], formats: tuple[str, ...]) -> list[str]:
    """The report of one `check` in each format (one read, --also-write for the others)."""
    outs = [Path(f"report.{fmt}") for fmt in formats]
    also = [a for fmt, out in zip(formats[1:], outs[1:]) for a in ("--also-write", f"{fmt}={out}")]
    with redirect_stderr(io.StringIO()):
        main(
            [
                "check",
                "-q",
                "--no-timings",
                "--format",
                formats[0],
                "-o",
                str(outs[0]),
                *also,
                *(["--no-config"] if "--config" not in args else []),
                *args,
            ]
        )
    return [out.read_text(encoding="utf-8") for out in outs]


def _dotted(label: str) -> str:
    m = re.fullmatch(r"(\d+)(\d)([af]?)", label)
    return f"{m[1]}.{m[2]}{m[3]}" if m else label


def _gpus(code: Code, data: dict) -> list[list[str]]:
    """The GPUs a finding is about, each as the spellings a message may name it by. D002's `gpus`
    are the floor of each GPU in its scope, which it names as a whole ("on its claimed GPUs")."""
    out: list[list[str]] = []
    if code == Code.D002:
        return out
    for key in ("missing", "fails", "gpus", "jit", "extra", "gpu", "newest", "serves"):
        value = data.get(key)
        for x in [value] if isinstance(value, str) else value or []:
            x = str(x)
            out.append([x] if not re.fullmatch(r"\d+[af]?", x) else [_dotted(x), f"sm_{x}", f"compute_{x}"])
    return out


def fix_span(message: str) -> tuple[int, int] | None:
    """Where the fix starts ("Fix: ") and ends: the first ". " outside quotes, or the end."""
    start = message.find("Fix: ")
    if start < 0:
        return None
    quoted = False
    for i in range(start + 5, len(message)):
        if message[i] == '"':
            quoted = not quoted
        elif not quoted and message.startswith(". ", i):
            return start, i + 1
    return start, len(message)


def verdict_and_fix_problems(code: Code, data: dict, text: str) -> list[str]:
    """What is missing from the first LINE characters of `text` (a message, or a text line holding it)."""
    head = text[:LINE]
    problems = []
    span = fix_span(text)
    if CODES[code].severity != INFO:
        if span is None:
            return ["no 'Fix: '"]
        if span[1] > LINE:
            problems.append(f"the fix ends at {span[1]}")
        fix = text[span[0] + 5 : span[1]]
        if len(fix.split()) < 3:
            problems.append(f"a fix of fewer than 3 words: {fix!r}")
        if (
            code in (Code.G001, Code.K001, Code.K004, Code.G009)
            and data.get("vendor") != "amd"
            and not RECORD.search(fix)
            and "build for" in fix
            and "gfx" not in fix
        ):
            problems.append("no record entry in the fix")
    elif code in VERDICT and VERDICT[code] not in head:
        problems.append(f"no {VERDICT[code]!r} in the first {LINE} characters")
    before = head[: span[0]] if span else head
    for spellings in _gpus(code, data):
        if not any(s in before for s in spellings):
            problems.append(f"the GPU {spellings[0]} is not named before the fix within {LINE} characters")
    return problems


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, dict, str]]:
    """Every case's JSON report, SARIF log and default text, run in one working directory."""
    work = tmp_path_factory.mktemp("inputs")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        cases = {**_inputs(work), **_real_inputs(work)}
        out = {}
        for name, args in cases.items():
            rep, sarif, text = _check_all(args, ("json", "sarif", "text"))
            out[name] = (json.loads(rep), json.loads(sarif), text)
        return out


def _findings(report: dict) -> list[dict]:
    return [f for t in report["targets"] for f in t["findings"]]


def test_every_code_but_those_without_an_input_is_produced(reports):
    produced = {f["code"] for rep, _, _ in reports.values() for f in _findings(rep)}
    assert produced.isdisjoint(NO_INPUT), produced & set(NO_INPUT)
    assert {c.value for c in Code} - set(NO_INPUT) - produced == set()


def test_every_json_message_says_its_verdict_and_fix_first(reports):
    bad = [
        (name, f["code"], p, f["message"])
        for name, (rep, _, _) in reports.items()
        for f in _findings(rep)
        for p in verdict_and_fix_problems(Code(f["code"]), f["data"], f["message"])
    ]
    assert bad == [], "\n".join(map(str, bad))


def test_every_sarif_message_says_its_verdict_and_fix_first(reports):
    bad = []
    for name, (rep, sarif, _) in reports.items():
        data = {(f["code"], f["message"]): f["data"] for f in _findings(rep)}
        for r in sarif["runs"][0]["results"]:
            text = r["message"]["text"]
            (d,) = {json.dumps(v) for (c, m), v in data.items() if c == r["ruleId"] and m in text}
            d = json.loads(d)
            bad += [(name, r["ruleId"], p, text) for p in verdict_and_fix_problems(Code(r["ruleId"]), d, text)]
    assert bad == [], "\n".join(map(str, bad))


def test_every_text_line_holds_its_verdict_and_fix_whole(reports):
    """The default text lists errors and warnings, each a line cut at 240 characters: the line holds
    the message whole up to the end of its fix (kernel names after it may be shortened or cut)."""
    bad, seen = [], 0
    for name, (rep, _, text) in reports.items():
        lines = text.splitlines()
        for f in _findings(rep):
            if f["severity"] == INFO:
                continue
            span = fix_span(f["message"])
            assert span is not None, f["message"]
            want = f["message"][: span[1]]
            mark = "✗" if f["severity"] == ERROR else "!"
            hits = [line for line in lines if line.startswith(f"{mark} {f['code']} ") and want in line]
            if not hits:
                bad.append((name, f["code"], "no line holds", want))
            elif hits[0].index(want) + len(want) > LINE:
                bad.append((name, f["code"], f"its fix ends at {hits[0].index(want) + len(want)}", hits[0]))
            seen += 1
    assert seen and bad == [], "\n".join(map(str, bad))


def test_a_folded_line_says_how_many_and_still_its_fix(reports):
    rep, _, text = reports["E011 folded"]
    (f,) = [f for f in _findings(rep) if f["code"] == "E011"]
    assert f["count"] == 7
    (line,) = [line for line in text.splitlines() if line.startswith("✗ E011 ")]
    assert "x7" in line[:20] and line.index("Fix: ") < LINE


def test_containers_are_named_by_section_and_index_with_their_kernels(reports):
    """No finding names a container by its offset alone (issue 39): a container a library's
    section holds is named by the section and its index (.nv_fatbin[2]); one in no section says so;
    a bare device-code file's first container is the file."""
    bad = []
    for name, (rep, _, _) in reports.items():
        for f in _findings(rep):
            for m in re.finditer(r"(?:container|bundle) at 0x[0-9a-f]+", f["message"]):
                near = f["message"][max(0, m.start() - 80) : m.end() + 120]
                if m.group(0).endswith(" at 0x0") and not f["subject"].endswith((".so", ".dll", ".pyd")):
                    continue  # the first container of a bare device-code file: the file names it
                if not re.search(r"\[\d+\]|no section", near):
                    bad.append((name, f["code"], f["message"]))
    assert bad == [], "\n".join(map(str, bad))


def test_a_record_named_by_a_fix_resolves_it(reports, tmp_path, monkeypatch):
    """The entry a K004 fix names, written into pyproject.toml as it stands, hides that finding."""
    rep, _, _ = reports["K004"]
    (f,) = [f for f in _findings(rep) if f["code"] == "K004"]
    m = RECORD.search(f["message"])
    assert m is not None
    entry = m.group(0).replace("<file:line>", "the host picks by architecture")
    header, body = entry.split("]] ", 1)
    lines = [header + "]]"] + [f"{k} = {v}" for k, v in re.findall(r'(\w+) = ("[^"]*")', body)]
    (tmp_path / "pyproject.toml").write_text("[tool.archaudit]\n" + "\n".join(lines) + "\n", encoding="utf-8")
    shutil.copy(CUDA / "lib_axpy_narrow_first.so", tmp_path)
    monkeypatch.chdir(tmp_path)
    rep = json.loads(_check(["--config", "pyproject.toml", "lib_axpy_narrow_first.so", "--arch", "80;90"], "json"))
    assert "K004" not in {f["code"] for f in _findings(rep)}


# ---- `archaudit explain CODE`: one cause and one fix per code, vendor code apart from the project's ----

# Codes about the target as a whole (the wheel, the claim, the config): whoever built a library, the fix
# is the publisher's.
WHOLE_TARGET = {
    Code.E001,
    Code.E002,
    Code.E003,
    Code.E004,
    Code.C001,
    Code.C002,
    Code.C003,
    Code.G003,
    Code.G006,
    Code.G011,
    Code.G019,
    Code.X001,
    Code.X002,
}


@pytest.mark.parametrize("code", list(Code))
def test_explain_gives_one_cause_and_one_fix(capsys, code):
    """Every fix that asks to build or rebuild a library says what it asks of the project's own library
    and that a vendor library has nothing to rebuild."""
    assert main(["explain", code.value]) == 0
    out = capsys.readouterr().out
    assert out.count("\nCause: ") == 1 and out.count("\nFix: ") == 1, out
    cause, fix = out[out.index("\nCause: ") : out.index("\nExample: ")], out[out.index("\nFix: ") :]
    assert len(cause.split()) > 5 and len(fix.split()) > 1
    if re.search(r"\b(?:re)?build", fix, re.I) and code not in WHOLE_TARGET:
        assert "vendor library" in fix and "nothing to rebuild" in fix and "project's own" in fix, fix


# ---- real wheels (the real-wheel tier; the largest in the census tier): long paths, floods of findings ----

_LARGE = pytest.mark.census  # over the real-wheel tier's 100 MiB (tests/wheels.py TIER_BYTES)
REAL = [  # (project, version, file, arguments): vendor libraries, a project's own code, long paths
    pytest.param(
        "nvidia-cudnn-cu12",
        "9.28.0.42",
        "nvidia_cudnn_cu12-9.28.0.42-py3-none-manylinux_2_27_x86_64.whl",
        ("--arch", "70;75;80;90;100;120"),
        id="nvidia-cudnn-cu12",
        marks=_LARGE,
    ),
    pytest.param(
        "onnxruntime-gpu",
        "1.16.3",
        "onnxruntime_gpu-1.16.3-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        ("--arch", "60;70;75;80;90"),
        id="onnxruntime-gpu",
        marks=_LARGE,
    ),
    pytest.param(
        "bitsandbytes",
        "0.50.2",
        "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl",
        ("--gpu", "H100", "--gpu", "V100"),
        id="bitsandbytes",
    ),
    pytest.param(
        "nvidia-cufft",
        "12.5.0.14",
        "nvidia_cufft-12.5.0.14-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        ("--gpu", "V100", "--gpu", "H100"),
        id="nvidia-cufft",
        marks=_LARGE,
    ),
]
LISTED = re.compile(r"^[✗!] ([A-Z]\d{3}) ")
COUNTED = re.compile(r": \d+ more (?:groups|[A-Z]\d{3} findings) \(-v")


def _line_problems(rep: dict, text: str) -> list[tuple[str, str]]:
    """Each error or warning line of the default text holds one finding's message up to the end
    of its fix, within 240 characters (lines that count findings left out say no verdict)."""
    wants = [(f["code"], f["message"][: span[1]]) for f in _findings(rep) if (span := fix_span(f["message"]))]
    bad = []
    for line in text.splitlines():
        m = LISTED.match(line)
        if m is None or COUNTED.search(line):
            continue
        ends = [line.index(w) + len(w) for c, w in wants if c == m[1] and w in line]
        if not ends or min(ends) > LINE:
            bad.append((m[1], line))
    return bad


@pytest.mark.slow
@pytest.mark.parametrize(("project", "version", "filename", "args"), REAL)
def test_real_wheels_say_their_verdict_and_fix_first(project, version, filename, args, tmp_path, monkeypatch):
    from wheels import fetch

    whl = fetch(project, version, filename=filename)
    (tmp_path / whl.name).symlink_to(whl)
    monkeypatch.chdir(tmp_path)
    rep_text, text = _check_all([whl.name, *args], ("json", "text"))
    rep = json.loads(rep_text)
    found = _findings(rep)
    assert any(f["severity"] != INFO for f in found)
    bad: list[tuple[str, ...]] = [
        (f["code"], p, f["message"][:LINE])
        for f in found
        for p in verdict_and_fix_problems(Code(f["code"]), f["data"], f["message"])
    ]
    bad += _line_problems(rep, text)
    assert bad == [], "\n".join(map(str, bad))
