"""Driver-version comparison, pinned where mutation testing found it loose (docs/mutation.md).

A driver given with fewer parts than the floor it is compared with stands for its .0 release:
580 is 580.0.0, below a floor of 580.0.5 (fail closed), and 580.0 is 580.
"""

from __future__ import annotations

import pytest

from archaudit.arch import driver_at_least


@pytest.mark.parametrize("have,need,ok", [
    ("580", "580.0.5", False),  # the missing parts are zeros, never more
    ("580.0", "580", True),  # and the floor's missing parts are zeros too
    ("580", "580", True),
    ("580.65.06", "580.65.6", True),  # numeric, not textual
    ("575.57.08", "580", False),
    ("580.65", "580.65.06", False),
])
def test_driver_versions_compare_part_by_part_with_missing_parts_zero(have, need, ok):
    assert driver_at_least(have, need) is ok
