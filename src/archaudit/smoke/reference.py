"""What the model probes' outputs must be, computed by archaudit itself (no framework imported).

The verdict of a model step is decided in archaudit's process, which never runs the wheel's code:
the inputs and weights are drawn here from a fresh seed, written for the child, and the child's
output (raw numbers, never a status) is compared with these float64 references. A child that
does not compute the model cannot know the answer in advance, and a child that claims a GPU run
on a machine where archaudit's own driver query found none is not believed (probes.py).
"""

from __future__ import annotations

import math
import os
import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass

Vector = list[float]


@dataclass(frozen=True)
class Tensor:
    """A row-major float32 tensor as plain numbers (the values are exactly float32)."""

    shape: tuple[int, ...]
    values: tuple[float, ...]

    def as_json(self) -> dict[str, object]:
        return {"shape": list(self.shape), "values": list(self.values)}


def _f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def draw(rng: random.Random, *shape: int) -> Tensor:
    n = math.prod(shape)
    return Tensor(tuple(shape), tuple(_f32(rng.uniform(-1.0, 1.0)) for _ in range(n)))


def fresh_rng() -> random.Random:
    """A seed no wheel can predict: each run asks for different numbers."""
    return random.Random(int.from_bytes(os.urandom(16), "little"))


def linear(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    """y = x @ w.T + b, as torch.nn.Linear: x (n, i), w (o, i), b (o)."""
    n, i = x.shape
    o = w.shape[0]
    out = []
    for r in range(n):
        xr = x.values[r * i : (r + 1) * i]
        for c in range(o):
            wc = w.values[c * i : (c + 1) * i]
            out.append(math.fsum(a * bb for a, bb in zip(xr, wc)) + (b.values[c] if b else 0.0))
    return Tensor((n, o), tuple(out))


def add(x: Tensor, y: Tensor) -> Tensor:
    return Tensor(x.shape, tuple(a + b for a, b in zip(x.values, y.values)))


def conv2d(x: Tensor, w: Tensor, b: Tensor, padding: int) -> Tensor:
    """torch.nn.Conv2d (stride 1, dilation 1, groups 1): x (n, c, h, w), w (o, c, k, k)."""
    n, c, h, wd = x.shape
    o, _, k, _ = w.shape
    oh, ow = h + 2 * padding - k + 1, wd + 2 * padding - k + 1
    xv, wv = x.values, w.values
    out = []
    for bn in range(n):
        for oc in range(o):
            for r in range(oh):
                for q in range(ow):
                    terms = []
                    for ic in range(c):
                        for kr in range(k):
                            ir = r + kr - padding
                            if not 0 <= ir < h:
                                continue
                            for kq in range(k):
                                iq = q + kq - padding
                                if 0 <= iq < wd:
                                    terms.append(
                                        xv[((bn * c + ic) * h + ir) * wd + iq] * wv[((oc * c + ic) * k + kr) * k + kq]
                                    )
                    out.append(math.fsum(terms) + b.values[oc])
    return Tensor((n, o, oh, ow), tuple(out))


def matmul(x: Tensor, w: Tensor) -> Tensor:
    """x (n, i) @ w (i, o), as jnp.dot."""
    n, i = x.shape
    o = w.shape[1]
    return Tensor(
        (n, o),
        tuple(
            math.fsum(x.values[r * i + j] * w.values[j * o + c] for j in range(i)) for r in range(n) for c in range(o)
        ),
    )


def mlp(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
    """tanh(x @ w1 + b1) @ w2 + b2: the model-jax MLP."""
    h = matmul(x, w1)
    width = w1.shape[1]
    hidden = Tensor(h.shape, tuple(math.tanh(v + b1.values[k % width]) for k, v in enumerate(h.values)))
    y = matmul(hidden, w2)
    out = w2.shape[1]
    return Tensor(y.shape, tuple(v + b2.values[k % out] for k, v in enumerate(y.values)))


@dataclass(frozen=True)
class Match:
    ok: bool
    max_abs: float
    why: str  # "max |got-ref| 1.2e-07 within rtol=..., atol=..." or what is wrong


def compare(
    got_shape: Sequence[int] | None, got: Sequence[object] | None, want: Tensor, rtol: float, atol: float
) -> Match:
    """The child's raw output against the reference: shape, count, finiteness, then closeness."""
    if got_shape is None or got is None:
        return Match(False, math.inf, "the child reported no output")
    if tuple(got_shape) != want.shape:
        return Match(False, math.inf, f"output shape {tuple(got_shape)}, expected {want.shape}")
    if len(got) != len(want.values) or not all(isinstance(v, (int, float)) for v in got):
        return Match(False, math.inf, f"{len(got)} output values, expected {len(want.values)} numbers")
    vals = [float(v) for v in got]  # type: ignore[arg-type]  # numbers, checked above
    if not all(math.isfinite(v) for v in vals):
        return Match(False, math.inf, "the output holds NaN or infinity")
    worst = max((abs(a - b) for a, b in zip(vals, want.values)), default=0.0)
    bad = [k for k, (a, b) in enumerate(zip(vals, want.values)) if abs(a - b) > atol + rtol * abs(b)]
    if bad:
        k = bad[0]
        return Match(
            False,
            worst,
            f"{len(bad)} of {len(vals)} values differ from archaudit's reference beyond "
            f"rtol={rtol:g}, atol={atol:g} (first at {k}: {vals[k]!r} against "
            f"{want.values[k]!r}; max |got-ref| {worst:.2e})",
        )
    return Match(True, worst, f"max |got-ref| {worst:.2e} within rtol={rtol:g}, atol={atol:g}")


__all__ = ["add", "compare", "conv2d", "draw", "fresh_rng", "linear", "matmul", "mlp", "Tensor"]
