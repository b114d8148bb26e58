"""Standalone device-code files: cubin ELF (header, section table, .nv.compat, symbols) and
PTX text (the .target and .version directives)."""

import re

from hypothesis import given, strategies as st

import fuzzlib as fz


@given(rel=st.sampled_from(fz.CUBIN_FIXTURES), decode=st.booleans(), data=st.data())
def test_cubin(rel, decode, data):
    lay = fz.layout(rel)
    original = fz.load(rel)
    mutant, note = data.draw(
        fz.mutated(original, lay.fields, lay.regions + [fz.Region("file", 0, len(original))]), label="mutation"
    )
    fz.check_mutant(rel, mutant, note, decode, "cubin", lenient_a=True)


TARGET_TOKENS = st.sampled_from(
    [
        "sm_80",
        "sm_90a",
        "sm_100f",
        "compute_90",
        "sm_",
        "sm_x",
        "sm_99999999999999999999",
        "",
        " ",
        "sm_80,",
        ",",
        "sm_80 debug",
        "SM_80",
        "sm_-1",
        "sm_0",
        "sm_\u00e9",
        "\x00",
        "compute_",
        "gfx90a",
    ]
)


@st.composite
def ptx_mutant(draw, text: bytes):
    lines = text.split(b"\n")
    how = draw(st.sampled_from(["target", "drop_target", "dup_target", "version", "bytes", "truncate"]))
    at = next(i for i, ln in enumerate(lines) if ln.startswith(b".target"))
    if how == "target":
        tok = draw(TARGET_TOKENS | st.text(max_size=30))
        lines[at] = draw(st.sampled_from([b".target ", b".target\t", b".target", b"  .target "])) + tok.encode(
            "utf-8", "surrogatepass"
        )
    elif how == "drop_target":
        del lines[at]
    elif how == "dup_target":
        lines.insert(at, b".target " + draw(TARGET_TOKENS).encode())
    elif how == "version":
        v = next(i for i, ln in enumerate(lines) if ln.startswith(b".version"))
        lines[v] = b".version " + draw(st.text(max_size=12)).encode("utf-8", "surrogatepass")
    elif how == "bytes":
        out = bytearray(text)
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, len(out) - 1))
            out[i] = draw(st.integers(0, 255))
        return fz.Mutant((bytes(out), "random bytes"))
    else:
        return fz.Mutant((text[: draw(st.integers(0, len(text)))], "truncate"))
    return fz.Mutant((b"\n".join(lines), how))


@given(rel=st.sampled_from(fz.PTX_FIXTURES), decode=st.booleans(), data=st.data())
def test_ptx_target(rel, decode, data):
    mutant, note = data.draw(ptx_mutant(fz.load(rel)), label="mutation")
    # A standalone PTX file states its target once, in .target: the fail-closed property here
    # is that a pass reports exactly the target of the first .target directive.
    run = fz.check_mutant(rel, mutant, note, decode, "ptx", fail_closed=False)
    if run.code == 0:
        first = next(ln for ln in mutant.split(b"\n") if re.match(rb"[ \t]*\.target\b", ln))
        m = re.match(rb"[ \t]*\.target[ \t]*([A-Za-z0-9_]+)[ \t]*(,|\r?$|//)", first)
        assert m, (note, first)
        token = m.group(1).decode()
        assert run.report is not None, run.stderr
        reported = [
            e["target"]
            for t in run.report["targets"]
            for lib in t["libraries"]
            for c in lib["container_list"]
            for e in c["entries"]
        ]
        assert reported == [token.replace("compute_", "sm_")], (note, first, reported)
