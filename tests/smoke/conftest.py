"""Fixtures of the smoke tests."""

from __future__ import annotations

import pytest

from helpers import NO_GPU_REASONS


@pytest.fixture
def no_gpu(monkeypatch):
    """No GPU for the children, on any machine: on a GPU runner the driver is there but sees no
    device, so both sides of the SKIP/FAIL rule are tested there too (not skipped)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    return NO_GPU_REASONS
