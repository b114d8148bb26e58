"""pyproject.toml [tool.archaudit]: generated tables with every key given values of every
type, plus raw byte corruption of the file. config.load either returns a Config or raises
ConfigError; through the CLI a bad file is exit 2 with a message, never a traceback."""

from hypothesis import given, strategies as st

import fuzzlib as fz
from archaudit import config

KEYS = sorted(config.KEYS) + ["unknown-key", "cuda_archs", ""]
SCALAR = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(["80;90", "sm_80", "gfx90a", "json", "kernels", "linux", "550.54", "newest", "13.0", "cmake"]),
)
VALUE = st.recursive(
    SCALAR,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["code", "library", "reason", "x"]), inner, max_size=4)
    ),
    max_leaves=8,
)


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return {float("inf"): "inf", float("-inf"): "-inf"}.get(v, "nan" if v != v else repr(v))
    if isinstance(v, str):
        return '"' + v.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f'"{k}" = {toml_value(x)}' for k, x in v.items()) + "}"


@st.composite
def pyproject(draw):
    table = draw(st.dictionaries(st.sampled_from(KEYS), VALUE, max_size=6))
    header = draw(
        st.sampled_from(["[tool.archaudit]", "[tool]\narchaudit = 1", "[tool.archaudit.x]", "[[tool.archaudit]]", ""])
    )
    text = header + "\n" + "".join(f'"{k}" = {toml_value(v)}\n' for k, v in table.items())
    raw = text.encode()
    if draw(st.integers(0, 3)) == 0:
        out = bytearray(raw)
        for _ in range(draw(st.integers(1, 4))):
            if out:
                out[draw(st.integers(0, len(out) - 1))] = draw(st.integers(0, 255))
        raw = bytes(out)
    return raw


@given(raw=pyproject())
def test_config_load(raw):
    fz.tally("config")
    path = fz.scratch("pyproject.toml")
    with open(path, "wb") as f:
        f.write(raw)
    try:
        config.load(path)
    except config.ConfigError:
        pass


@given(raw=pyproject())
def test_config_through_cli(raw):
    fz.tally("config-cli")
    path = fz.scratch("pyproject.toml")
    with open(path, "wb") as f:
        f.write(raw)
    run = fz.run_cli(["check", "-q", "--format", "json", "--config", path, str(fz.CUDA / "lib_sm80.so")])
    fz.check_run(run, 0, repr(raw))
    if run.code == 2:
        assert run.stderr.strip(), raw
