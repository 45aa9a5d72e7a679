"""Attribute strings of <data .../>: parsing for consumers, formatting for producers.

The IR keeps every attribute as text; these helpers are the single place that says
how a value is spelled, so the converter and the inference daemons agree.

Formatting rules (`fmt_value`):
  bool (and numpy bool)      -> "1" / "0"
  int (and numpy integers)   -> decimal, e.g. "-3"
  float (and numpy floats)   -> the shortest "%.Ng" (N = 1..9) that parses back to the
                                same float32, e.g. 0.1 -> "0.1", 1e-5 -> "1e-05",
                                9.9999997e-05 -> "0.0001"; inf/nan -> "inf"/"-inf"/"nan".
                                IR values are float32, so float32 round trip is the
                                contract; 9 significant digits always suffice.
  list / tuple / ndarray     -> elements formatted as above, joined by "," (no spaces)
  str                        -> as is
"""

from __future__ import annotations

import re

import numpy as np

from .errors import IRError

_INT_RE = re.compile(r"[+-]?[0-9]+")
_TRUE = {"1", "true"}
_FALSE = {"0", "false"}


def _bad(name: str, text, expected: str, where: str | None) -> IRError:
    return IRError(f"attribute {name!r} has value {text!r}, expected {expected}", where=where)


def as_int(text: str, name: str = "value", *, where: str | None = None) -> int:
    """'3' -> 3. Only plain decimal integers (no '3.0', '1_000' or '0x10')."""
    if not isinstance(text, str) or not _INT_RE.fullmatch(text.strip()):
        raise _bad(name, text, "an integer", where)
    return int(text.strip())


def as_float(text: str, name: str = "value", *, where: str | None = None) -> float:
    """'0.5' -> 0.5; also '1e-05', 'inf', 'nan'."""
    if not isinstance(text, str):
        raise _bad(name, text, "a number", where)
    try:
        # float() also accepts '1_0'; IR writers never produce that, reject it.
        if "_" in text:
            raise ValueError(text)
        return float(text)
    except ValueError:
        raise _bad(name, text, "a number", where) from None


def as_bool(text: str, name: str = "value", *, where: str | None = None) -> bool:
    """'1'/'true' -> True, '0'/'false' -> False (case-insensitive)."""
    key = text.strip().lower() if isinstance(text, str) else None
    if key in _TRUE:
        return True
    if key in _FALSE:
        return False
    raise _bad(name, text, "one of 1, 0, true, false", where)


def ints(text: str, name: str = "value", *, where: str | None = None) -> list[int]:
    """'1,2,3' -> [1, 2, 3]; '' -> []."""
    if isinstance(text, str) and not text.strip():
        return []
    if not isinstance(text, str):
        raise _bad(name, text, "comma-separated integers", where)
    try:
        return [as_int(part, name) for part in text.split(",")]
    except IRError:
        raise _bad(name, text, "comma-separated integers", where) from None


def floats(text: str, name: str = "value", *, where: str | None = None) -> list[float]:
    """'0.5,1,2e-3' -> [0.5, 1.0, 0.002]; '' -> []."""
    if isinstance(text, str) and not text.strip():
        return []
    if not isinstance(text, str):
        raise _bad(name, text, "comma-separated numbers", where)
    try:
        return [as_float(part.strip(), name) for part in text.split(",")]
    except IRError:
        raise _bad(name, text, "comma-separated numbers", where) from None


def _fmt_float(v) -> str:
    with np.errstate(over="ignore"):
        f = np.float32(v)
    if not np.isfinite(f):
        return "nan" if np.isnan(f) else ("inf" if f > 0 else "-inf")
    for digits in range(1, 10):
        text = "%.*g" % (digits, f)
        with np.errstate(over="ignore"):  # near float32 max a rounded-up text overflows
            if np.float32(float(text)) == f:
                return text
    raise AssertionError("unreachable: 9 significant digits round-trip any float32")


def fmt_value(v) -> str:
    """Spell a Python/numpy value as an IR attribute string (rules in the module doc)."""
    if isinstance(v, str):
        return v
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return _fmt_float(v)
    if isinstance(v, np.ndarray):
        return ",".join(fmt_value(x) for x in v.ravel().tolist())
    if isinstance(v, (list, tuple)):
        return ",".join(fmt_value(x) for x in v)
    raise IRError(f"cannot write a value of type {type(v).__name__} ({v!r}) as an IR attribute; "
                  "use a bool, int, float, str or a list of them")
