"""archaudit's own reference outputs for the model probes (archaudit.smoke.reference), against
numpy's float64 arithmetic over the same drawn numbers, and the comparison that judges a child's
raw output by them."""

from __future__ import annotations

import math
import random
import struct

import numpy as np
import pytest

from archaudit.smoke import reference
from archaudit.smoke.reference import Tensor


def arr(t: Tensor) -> np.ndarray:
    return np.array(t.values, dtype=np.float64).reshape(t.shape)


def close(t: Tensor, want: np.ndarray) -> bool:
    return t.shape == want.shape and np.allclose(arr(t), want, rtol=1e-12, atol=1e-12)


RNG = random.Random(20260101)


def test_drawn_values_are_exactly_float32_in_the_shape_asked_for():
    t = reference.draw(RNG, 3, 4, 5)
    assert t.shape == (3, 4, 5) and len(t.values) == 60
    assert all(struct.unpack("<f", struct.pack("<f", v))[0] == v and -1 <= v <= 1 for v in t.values)
    assert np.array_equal(np.array(t.values, dtype=np.float32).astype(np.float64), np.array(t.values))
    assert t.as_json() == {"shape": [3, 4, 5], "values": list(t.values)}
    assert reference.fresh_rng().random() != reference.fresh_rng().random()  # a fresh seed each run


def test_linear_is_x_times_w_transposed_plus_b():
    x, w, b = reference.draw(RNG, 4, 6), reference.draw(RNG, 3, 6), reference.draw(RNG, 3)
    assert close(reference.linear(x, w, b), arr(x) @ arr(w).T + arr(b))
    assert close(reference.linear(x, w, None), arr(x) @ arr(w).T)


def test_matmul_add_and_the_mlp_are_numpys():
    x, w1, b1 = reference.draw(RNG, 5, 8), reference.draw(RNG, 8, 16), reference.draw(RNG, 16)
    w2, b2 = reference.draw(RNG, 16, 4), reference.draw(RNG, 4)
    assert close(reference.matmul(x, w1), arr(x) @ arr(w1))
    assert close(reference.add(x, x), 2 * arr(x))
    assert close(reference.mlp(x, w1, b1, w2, b2), np.tanh(arr(x) @ arr(w1) + arr(b1)) @ arr(w2) + arr(b2))


@pytest.mark.parametrize("padding", [0, 1, 2])
def test_conv2d_is_a_cross_correlation_over_the_zero_padded_input(padding):
    x, w, b = reference.draw(RNG, 2, 3, 6, 5), reference.draw(RNG, 4, 3, 3, 3), reference.draw(RNG, 4)
    xp = np.pad(arr(x), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # n, c, oh, ow, kh, kw
    want = np.einsum("ncijkl,ockl->noij", windows, arr(w)) + arr(b)[None, :, None, None]
    assert close(reference.conv2d(x, w, b, padding), want)


def test_compare_passes_float32_results_and_names_what_is_wrong():
    x, w, b = reference.draw(RNG, 4, 6), reference.draw(RNG, 3, 6), reference.draw(RNG, 3)
    want = reference.linear(x, w, b)
    got = (arr(x).astype(np.float32) @ arr(w).astype(np.float32).T + arr(b).astype(np.float32)).ravel()
    ok = reference.compare([4, 3], [float(v) for v in got], want, 1e-4, 1e-4)
    assert ok.ok and ok.max_abs < 1e-5 and ok.why.startswith("max |got-ref|")
    values = list(want.values)
    assert reference.compare(None, values, want, 1e-4, 1e-4).why == "the child reported no output"
    assert reference.compare([3, 4], values, want, 1e-4, 1e-4).why == "output shape (3, 4), expected (4, 3)"
    assert reference.compare([4, 3], values[:-1], want, 1e-4, 1e-4).why == "11 output values, expected 12 numbers"
    assert not reference.compare([4, 3], [*values[:-1], "1.0"], want, 1e-4, 1e-4).ok
    nan = reference.compare([4, 3], [*values[:-1], math.nan], want, 1e-4, 1e-4)
    assert not nan.ok and nan.why == "the output holds NaN or infinity"
    off = reference.compare([4, 3], [*values[:5], values[5] + 0.01, *values[6:]], want, 1e-4, 1e-4)
    assert not off.ok and off.why.startswith("1 of 12 values differ") and "(first at 5:" in off.why
    assert off.max_abs == pytest.approx(0.01)
