"""archaudit._speedups, the compiled twins of two Python readers, where the install built them
(setup.py: optional, so a platform without a C compiler installs and runs without them).

Each gives its Python reference's answers (tests/read/test_speedups.py): `cubin_tables` those of
codefacts._tables, `find` those of bytes.find. ARCHAUDIT_PURE_PYTHON=1 runs the references."""

from __future__ import annotations

import os

try:
    from .. import _speedups as built
except ImportError:  # pragma: no cover - a platform without a compiler
    built = None  # type: ignore[assignment]

active = None if os.environ.get("ARCHAUDIT_PURE_PYTHON") else built


__all__ = ["active"]
