"""[tool.archaudit] in the project's pyproject.toml.

The project root is found as black finds it: the nearest directory, from the working directory
upward, that holds .git, .hg or pyproject.toml. Only that root's pyproject.toml is read, so a
file in a parent directory the user never chose (a shared /tmp, a home directory) cannot change
a verdict. Command-line flags override the file; the file overrides the defaults.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from .errors import UsageError

# The report formats and detail levels, for the config's keys and the flags alike.
Format = Literal["text", "json", "markdown", "github", "junit", "sarif"]
Detail = Literal["libraries", "containers", "kernels"]
FORMATS: tuple[Format, ...] = get_args(Format)
DETAILS: tuple[Detail, ...] = get_args(Detail)

KEYS = {
    "cuda-archs",
    "cuda-archs-style",
    "amd-archs",
    "cuda-version",
    "exact",
    "require-ptx",
    "strict",
    "strict-kernels",
    "driver",
    "driver-os",
    "gpus",
    "select",
    "ignore",
    "ignore-library",
    "require-device-code",
    "detail",
    "format",
    "costs",
    "allow-loss",
    "data",
    "library",
    "library-group",
}


# Keys whose value is one string (of these choices, when listed).
_SCALARS = {
    "cuda-archs-style": ("auto", "cmake", "torch", "nvcc", "list"),
    "driver": (),
    "require-ptx": ("newest",),
    "driver-os": ("linux", "windows"),
    "detail": DETAILS,
    "format": FORMATS,
}


class ConfigError(UsageError):
    """The configuration file is unreadable or has a wrong key or value (exit 2)."""


@dataclass(frozen=True)
class Config:
    path: str | None = None
    values: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


ROOT_MARKERS = (".git", ".hg", "pyproject.toml")


def find_project_root(start: str | None = None) -> str | None:
    """The nearest directory from `start` (the working directory) upward holding .git, .hg or
    pyproject.toml, as black's find_project_root (black/files.py) decides; None at the top.

    black starts from the common parent of its source files; archaudit's targets are build
    outputs (a wheel in a download directory, an installed distribution), so the working
    directory, where the command runs, is the start."""
    here = os.path.abspath(start or os.getcwd())
    while True:
        if (
            os.path.exists(os.path.join(here, ".git"))
            or os.path.isdir(os.path.join(here, ".hg"))
            or os.path.isfile(os.path.join(here, "pyproject.toml"))
        ):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def find_pyproject(start: str | None = None) -> str | None:
    """The project root's pyproject.toml when it has a [tool.archaudit] table, else None.

    No directory above the root is searched: a parent's table does not stand in for a
    project that has none. A root pyproject.toml that cannot be read or parsed is a
    ConfigError, not skipped: it may hold the table."""
    root = find_project_root(start)
    if root is None:
        return None
    candidate = os.path.join(root, "pyproject.toml")
    if not os.path.isfile(candidate):
        return None
    tool = _read(candidate).get("tool", {})
    return candidate if isinstance(tool, dict) and "archaudit" in tool else None


def _read(path: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):  # imported when a file is read: most checks have none
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None


CODE_LENGTH = 4  # a whole finding code ("G001"); anything shorter is a prefix ("G", "G00")


def _matches_every_library(glob: str) -> bool:
    """A library glob of nothing but `*` and `/` ("*", "**", "*/*"): it names no library."""
    return set(glob.strip()) <= {"*", "/"}


def load(path: str | None = None, *, discover: bool = True) -> Config:
    if path is None and discover:
        path = find_pyproject()
    if path is None:
        return Config()
    table = _archaudit_table(path, _read(path))
    _check_keys(path, table)
    _check_types(path, table)
    _check_ignore_library(path, table.get("ignore-library", []))
    _check_data(path, table.get("data", []))
    _check_libraries(path, table.get("library", []))
    _check_library_groups(path, table.get("library-group", []))
    return Config(path, table)


def _archaudit_table(path: str, data: dict[str, Any]) -> dict[str, Any]:
    """The [tool.archaudit] table of a parsed pyproject (empty when absent)."""
    tool = data.get("tool", {})
    table = tool.get("archaudit", {}) if isinstance(tool, dict) else None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.archaudit] must be a table")
    return table


def _check_keys(path: str, table: dict[str, Any]) -> None:
    """Every key is one archaudit reads; a misspelt one gets a suggestion."""
    unknown = sorted(set(table) - KEYS)
    if unknown:
        from .suggest import did_you_mean

        hints = "".join(did_you_mean(k, KEYS) for k in unknown)
        raise ConfigError(f"{path}: unknown key(s) in [tool.archaudit]: {', '.join(unknown)}{hints}")


def _check_types(path: str, table: dict[str, Any]) -> None:
    """Each scalar and list key holds the type its option takes."""
    _check_switches_and_lists(path, table)
    _check_scalars(path, table)


def _is_strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _check_switches_and_lists(path: str, table: dict[str, Any]) -> None:
    """The true/false switches, the lists of strings, and cuda-archs (a string or a list)."""
    for key in ("exact", "strict", "strict-kernels", "costs", "allow-loss"):
        if key in table and not isinstance(table[key], bool):
            raise ConfigError(f"{path}: {key} must be true or false")
    for key in ("select", "ignore", "require-device-code", "gpus", "amd-archs"):
        if key in table and not _is_strings(table[key]):
            raise ConfigError(f"{path}: {key} must be a list of strings")
    if "cuda-archs" in table and not (isinstance(table["cuda-archs"], str) or _is_strings(table["cuda-archs"])):
        raise ConfigError(f"{path}: cuda-archs must be a string or a list of strings")


def _check_scalars(path: str, table: dict[str, Any]) -> None:
    """The string options (one of their choices, where they have some), cuda-version and the
    ignore-library list."""
    for key, choices in _SCALARS.items():
        if key in table and not (isinstance(table[key], str) and (not choices or table[key] in choices)):
            what = f"one of {', '.join(choices)}" if choices else "a string"
            raise ConfigError(f"{path}: {key} must be {what}")
    version = table.get("cuda-version", "")
    if isinstance(version, bool) or not isinstance(version, (str, int, float)):
        raise ConfigError(f'{path}: cuda-version must be a string such as "13.0"')
    if not isinstance(table.get("ignore-library", []), list):
        raise ConfigError(f"{path}: ignore-library must be a list of tables")


def _check_ignore_library(path: str, rules: list[Any]) -> None:
    """[[tool.archaudit.ignore-library]]: each entry a code and a library glob; one that hides a whole
    code prefix in every library needs a reason."""
    for rule in rules:
        if (
            not isinstance(rule, dict)
            or not {"code", "library"} <= set(rule)
            or not set(rule) <= {"code", "library", "reason"}
            or not all(isinstance(v, str) for v in rule.values())
        ):
            raise ConfigError(f"{path}: each ignore-library entry needs code and library (and a reason)")
        if not rule["code"].strip() or not rule["library"].strip():
            raise ConfigError(
                f"{path}: an ignore-library entry has an empty code or library, which would match every finding"
            )
        if (
            _matches_every_library(rule["library"])
            and any(len(c.strip()) < CODE_LENGTH for c in rule["code"].split(","))
            and not rule.get("reason", "").strip()
        ):
            raise ConfigError(
                f"{path}: ignore-library entry code = {rule['code']!r}, library = "
                f"{rule['library']!r} hides a whole code prefix in every library; give it "
                f"a reason (or name the libraries, or use ignore = [...])"
            )


def _check_data(path: str, entries: object) -> None:
    """[[tool.archaudit.data]]: each entry a member glob that names members, and a reason (what the
    report shows a reviewer for leaving those members out of the verdict)."""
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: data must be a list of tables ([[tool.archaudit.data]])")
    for entry in entries:
        if (
            not isinstance(entry, dict)
            or set(entry) != {"member", "reason"}
            or not all(isinstance(v, str) and v.strip() for v in entry.values())
        ):
            raise ConfigError(f"{path}: each data entry needs a member glob and a reason")
        if _matches_every_library(entry["member"]):
            raise ConfigError(
                f"{path}: data entry member = {entry['member']!r} names no member: it would "
                f"leave every library out of the verdict"
            )


def _check_libraries(path: str, entries: object) -> None:
    """[[tool.archaudit.library]]: each entry a library glob that names libraries, its own
    architectures (a claim in any spelling) and a reason: where the project's host code gates it."""
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: library must be a list of tables ([[tool.archaudit.library]])")
    for entry in entries:
        if (
            not isinstance(entry, dict)
            or not {"path", "arch", "reason"} <= set(entry) <= {"path", "arch", "reason", "kernels"}
            or not all(isinstance(entry[k], str) and entry[k].strip() for k in ("path", "reason"))
            or not (
                isinstance(entry["arch"], str)
                and entry["arch"].strip()
                or isinstance(entry["arch"], list)
                and entry["arch"]
                and all(isinstance(x, str) for x in entry["arch"])
            )
        ):
            raise ConfigError(
                f"{path}: each library entry needs path (a library glob), arch (its architectures) "
                f"and reason (where the host code gates it)"
            )
        if _matches_every_library(entry["path"]):
            raise ConfigError(
                f"{path}: library entry path = {entry['path']!r} names no library: give the "
                f"wheel's claim instead (cuda-archs)"
            )
        _check_kernel_globs(path, entry)


def _check_kernel_globs(path: str, entry: dict[str, Any]) -> None:
    """A library entry's optional kernels: a non-empty list of globs over kernel names, none of
    which names every kernel (that is the entry without kernels)."""
    if "kernels" not in entry:
        return
    globs = entry["kernels"]
    if not (isinstance(globs, list) and globs and all(isinstance(g, str) and g.strip() for g in globs)):
        raise ConfigError(
            f"{path}: library entry {entry['path']!r}: kernels must be a list of kernel-name globs "
            f'(kernels = ["fused_a_gemm_kernel", "*kda_decode*"])'
        )
    for g in globs:
        if set(g.strip()) <= {"*"}:
            raise ConfigError(
                f"{path}: library entry {entry['path']!r}: kernels glob {g!r} names every kernel: "
                f"leave kernels out to gate the whole library"
            )


def _check_library_groups(path: str, entries: object) -> None:
    """[[tool.archaudit.library-group]]: each entry library globs (paths) and a reason: where the
    host code picks one of them."""
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: library-group must be a list of tables ([[tool.archaudit.library-group]])")
    for entry in entries:
        if (
            not isinstance(entry, dict)
            or set(entry) != {"paths", "reason"}
            or not (
                isinstance(entry["paths"], list)
                and entry["paths"]
                and all(isinstance(x, str) and x.strip() for x in entry["paths"])
            )
            or not (isinstance(entry["reason"], str) and entry["reason"].strip())
        ):
            raise ConfigError(
                f"{path}: each library-group entry needs paths (library globs) and reason (where "
                f"the host code picks one of them)"
            )
        if any(_matches_every_library(g) for g in entry["paths"]):
            raise ConfigError(f"{path}: a library-group glob names no library: {entry['paths']!r}")


__all__ = [
    "Config",
    "ConfigError",
    "Detail",
    "DETAILS",
    "find_project_root",
    "find_pyproject",
    "Format",
    "FORMATS",
    "KEYS",
    "load",
]
