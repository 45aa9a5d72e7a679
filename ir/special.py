"""The error function and GELU, as numpy: what Activation's erf and gelu compute,
shared by the converter (constant folding) and the CPU daemon's numpy engine.

numpy has no erf (and the daemons do not need scipy for one function): a Maclaurin
series where |x| <= 0.5 and Numerical Recipes' Chebyshev fit of erfc beyond it
(fractional error < 1.2e-7), in float64, so that 1 + erf(x) keeps erfc's relative
accuracy far into the negative tail, where exact GELU's value is tiny.
"""
from __future__ import annotations

import math

import numpy as np

_SERIES_TERMS = 9  # at |x| = 0.5 the 9th term is < 1e-12 of the sum
_ERFC_FIT = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
             -0.82215223, 0.17087277)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_TANH_CUBIC = 0.044715


def _erfc_tail(z: np.ndarray) -> np.ndarray:
    """erfc(z) for z >= 0."""
    t = 1.0 / (1.0 + 0.5 * z)
    poly = np.full_like(t, _ERFC_FIT[-1])
    for c in _ERFC_FIT[-2:0:-1]:
        poly *= t
        poly += c
    poly *= t
    poly += _ERFC_FIT[0]
    return t * np.exp(poly - z * z)


def _series(x: np.ndarray) -> np.ndarray:
    """erf(x) for |x| <= 0.5 (other elements: garbage, finite)."""
    x = np.where(np.abs(x) <= 0.5, x, 0.0)
    x2 = x * x
    term = x.copy()
    total = x.copy()
    for n in range(1, _SERIES_TERMS):
        term *= -x2 / n
        total += term / (2 * n + 1)
    return total * (2.0 / math.sqrt(math.pi))


def erf(x) -> np.ndarray:
    """erf(x) in float64 (any shape)."""
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore", under="ignore"):
        tail = 1.0 - _erfc_tail(np.abs(x))
    return np.where(np.abs(x) <= 0.5, _series(x), np.copysign(tail, x))


def one_plus_erf(x) -> np.ndarray:
    """1 + erf(x) = erfc(-x), without the cancellation of 1 + erf where erf is near -1."""
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore", under="ignore"):
        return np.where(x < -0.5, _erfc_tail(np.abs(x)), 1.0 + erf(x))


def gelu(x, approximation: str = "erf") -> np.ndarray:
    """x * Phi(x) (approximation "erf": exact; "tanh": the tanh form BERT and GPT-2 use), float64."""
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if approximation == "tanh":
            gate = 1.0 + np.tanh(SQRT_2_OVER_PI * (x + GELU_TANH_CUBIC * x * x * x))
        else:
            gate = one_plus_erf(x * (1.0 / math.sqrt(2.0)))
        return 0.5 * x * gate
