"""Hypothesis profiles of the fuzz suite.

- ``ci`` (default): a bounded, derandomized run: 50 inputs per test, the whole suite in well
  under three minutes on two cores.
- ``long`` (``ARCHAUDIT_FUZZ=long``): 100,000 inputs per test, randomized, for local runs.
  ``ARCHAUDIT_FUZZ_EXAMPLES=N`` overrides the count of either profile.

With ``ARCHAUDIT_FUZZ_COUNTS=FILE`` the number of inputs each test actually ran is written to
FILE (JSON) at the end of the session; the README ("Hostile input") records those numbers.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from hypothesis import HealthCheck, Phase, settings

import fuzzlib

_COMMON: dict[str, Any] = dict(
    deadline=None,  # no time is asserted: work is counted in steps (test_linear_bounds.py)
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
        HealthCheck.filter_too_much,
    ],
    print_blob=True,
)
_n = os.environ.get("ARCHAUDIT_FUZZ_EXAMPLES")
settings.register_profile("ci", max_examples=int(_n or 50), derandomize=True, database=None, **_COMMON)
settings.register_profile(
    "long",
    max_examples=int(_n or 100_000),
    derandomize=False,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    **_COMMON,
)
settings.load_profile("long" if os.environ.get("ARCHAUDIT_FUZZ") == "long" else "ci")


def _stop(signum, frame):  # `timeout` sends SIGTERM: stop like Ctrl-C, counts are written
    raise KeyboardInterrupt


if os.environ.get("ARCHAUDIT_FUZZ_COUNTS"):  # long runs only (tests/fuzz/long_run.py)
    signal.signal(signal.SIGTERM, _stop)


def pytest_sessionfinish(session, exitstatus):
    fuzzlib.write_counts()
