"""One attribute of an IR layer type: its name, kind, default, accepted spellings.

Kinds and how their values look in Python (what `LayerSchema.read` returns and
`LayerSchema.write` takes):

    Int     int                 "3"
    Float   float               "0.5", "1e-05", "inf"
    Bool    bool                "1"/"0" (or "true"/"false" with words=True; both are read)
    Str     str                 as is
    Enum    str (canonical)     one of `choices`; `spellings` maps other accepted
                                texts to a choice (e.g. "prod" -> "mul")
    Ints    list[int]           "1,2,3"
    Floats  list[float]         "0.5,1,2"
    YX      (y, x) int pair     IR v2 spells a 2-D parameter as `<base>-x` and `<base>-y`
            or (z, y, x)        (plus, for stride, the 4-D list "1,1,y,x"); later IRs
                                as one list ("3,3", "kernel", "strides", ...): read both.
                                A 3-D window (volumes: NCDHW) has no -x/-y spelling: it is
                                written as the later IRs' lists ("kernel", "strides",
                                "pads_begin", "pads_end", "dilations"), as the Model
                                Optimizer wrote its 3-D layers

A default is a value, `None` (optional: absent means "not given"), REQUIRED, or
`Same("other")` (absent means: the value of attribute `other`, e.g. the end pads
default to the start pads).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np

from ..attrs import as_bool, as_float, as_int, floats, fmt_value, ints
from ..errors import IRError


class _Required:
    def __repr__(self):
        return "REQUIRED"


REQUIRED = _Required()


@dataclass(frozen=True)
class Same:
    """Default: the value of another attribute of the same layer."""
    other: str


@dataclass
class Attr:
    name: str
    kind: str                      # int, float, bool, str, enum, ints, floats, yx
    default: object = None
    aliases: tuple[str, ...] = ()  # other names readers accept (IR spellings of other tools)
    choices: tuple[str, ...] = ()  # enum: canonical values
    spellings: dict = field(default_factory=dict)  # enum: other accepted text -> canonical
    ignore_case: bool = False      # enum
    words: bool = False            # bool written as "true"/"false"
    min: float | None = None       # smallest valid value (each element / both axes)
    max: float | None = None       # largest valid value
    x: str | None = None           # yx: the attribute names of the two axes
    y: str | None = None
    lists: tuple[str, ...] = ()    # yx: list attributes also read ("3,3", "1,1,2,2")
    write_list: str | None = None  # yx: also write this list attribute as "1,1,y,x"
    nd: str | None = None          # yx: the list attribute a 3-D window is written as
    doc: str = ""

    # --- names ----------------------------------------------------------------------
    def ir_names(self) -> tuple[str, ...]:
        """Every attribute name under which this attribute may appear in <data>."""
        if self.kind == "yx":
            names = [self.x, self.y, *self.lists]
            for extra in (self.write_list, self.nd):
                if extra and extra not in names:
                    names.append(extra)
            return tuple(names)
        return (self.name, *self.aliases)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    # --- reading --------------------------------------------------------------------
    def parse(self, data: dict[str, str]):
        """The typed value from a layer's <data> attributes; REQUIRED/Same(...) when absent."""
        if self.kind == "yx":
            return self._parse_yx(data)
        for name in (self.name, *self.aliases):
            if name in data:
                value = self._parse_text(data[name], name)
                self._check_range(value, name)
                return value
        return self.default

    def _parse_text(self, text, name):
        kind = self.kind
        if kind == "int":
            return as_int(text, name)
        if kind == "float":
            return as_float(text, name)
        if kind == "bool":
            return as_bool(text, name)
        if kind == "ints":
            return ints(text, name)
        if kind == "floats":
            return floats(text, name)
        if not isinstance(text, str):
            raise IRError(f"attribute {name!r} has value {text!r}, expected a string")
        if kind == "str":
            return text
        return self._canonical(text.strip(), name)

    def _canonical(self, text, name):
        key = text.lower() if self.ignore_case else text
        for choice in self.choices:
            if key == (choice.lower() if self.ignore_case else choice):
                return choice
        for spelling, choice in self.spellings.items():
            if key == (spelling.lower() if self.ignore_case else spelling):
                return choice
        raise IRError(f"attribute {name!r} is {text!r}, which is not one of {', '.join(self.choices)}")

    def _parse_yx(self, data):
        if self.x in data or self.y in data:
            if self.x not in data or self.y not in data:
                raise IRError(f"has only one of the attributes {self.x!r} and {self.y!r}; both are needed")
            value = (as_int(data[self.y], self.y), as_int(data[self.x], self.x))
            self._check_range(value[1], self.x)
            self._check_range(value[0], self.y)
            return value
        for name in self.lists:
            if name in data:
                values = ints(data[name], name)
                if not values:
                    raise IRError(f"attribute {name!r} is empty")
                self._check_range(values, name)
                return _window_of_list(values, name == self.write_list)
        if self.default is REQUIRED or isinstance(self.default, Same) or self.default is None:
            return self.default
        return tuple(self.default)

    def _check_range(self, value, name):
        if (self.min is None and self.max is None) or value is None:
            return
        values = value if isinstance(value, (list, tuple)) else [value]
        shown = fmt_value(list(values)) if len(values) > 1 else values[0]
        if self.min is not None and any(v < self.min for v in values):
            raise IRError(f"attribute {name!r} is {shown}; it must be at least {fmt_value(self.min)}")
        if self.max is not None and any(v > self.max for v in values):
            raise IRError(f"attribute {name!r} is {shown}; it must be at most {fmt_value(self.max)}")

    # --- writing --------------------------------------------------------------------
    def format(self, value) -> dict[str, str]:
        """{IR attribute name: text} for a Python value of this attribute."""
        kind = self.kind
        if kind == "yx":
            window = _window(value, self.name)
            self._check_range(window, self.name)
            if len(window) == 3:
                if not self.nd:
                    raise IRError(f"attribute {self.name!r} takes a (y, x) pair, got {value!r}")
                return {self.nd: fmt_value(list(window))}
            y, x = window
            out = {}
            if self.write_list:
                out[self.write_list] = f"1,1,{y},{x}"
            out[self.x] = str(x)
            out[self.y] = str(y)
            return out
        if kind == "int":
            value = _integer(value, self.name)
        elif kind == "float":
            value = _number(value, self.name)
        elif kind == "bool":
            value = _boolean(value, self.name)
            return {self.name: ("true" if value else "false") if self.words else ("1" if value else "0")}
        elif kind == "ints":
            value = [_integer(v, self.name) for v in _sequence(value, self.name)]
        elif kind == "floats":
            value = [_number(v, self.name) for v in _sequence(value, self.name)]
        elif kind == "enum":
            if not isinstance(value, str):
                raise IRError(f"attribute {self.name!r} takes one of {', '.join(self.choices)}, got {value!r}")
            value = self._canonical(value, self.name)
        elif not isinstance(value, str):
            raise IRError(f"attribute {self.name!r} takes a string, got {value!r}")
        self._check_range(value, self.name)
        return {self.name: fmt_value(value)}

    def validate(self, value):
        """Raises IRError if a Python value is of the wrong kind or out of range."""
        self.format(value)

    def check_text(self, name: str, text: str):
        """Parses one written attribute as a reader would (IRError if it does not parse)."""
        if self.kind == "yx":
            parsed = as_int(text, name) if name in (self.x, self.y) else ints(text, name)
            self._check_range(parsed if isinstance(parsed, list) else [parsed], name)
            return
        self._check_range(self._parse_text(text, name), name)


def _window(value, name):
    """A 2-D (y, x) or 3-D (z, y, x) window value; an integer is the same on both axes of a 2-D one."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value), int(value)
    items = _sequence(value, name)
    if len(items) not in (2, 3):
        raise IRError(f"attribute {name!r} takes a (y, x) pair or a (z, y, x) triple, got {value!r}")
    return tuple(_integer(item, name) for item in items)


def _window_of_list(values, written_4d: bool):
    """A window from a list attribute: one value for both axes of a 2-D window, a pair, a
    triple (3-D), or the axes after N and C of a full-rank stride list ("1,1,y,x",
    "1,1,z,y,x"); other lists of 4 or more values give their last two, as before."""
    if len(values) == 1:
        return values[0], values[0]
    if len(values) in (2, 3):
        return tuple(values)
    if written_4d and len(values) == 5:
        return tuple(values[2:])
    return values[-2], values[-1]


def _sequence(value, name):
    if isinstance(value, np.ndarray):
        return value.ravel().tolist()
    if isinstance(value, (list, tuple)):
        return list(value)
    raise IRError(f"attribute {name!r} takes a list, got {value!r}")


def _integer(value, name):
    if isinstance(value, (bool, np.bool_)):
        raise IRError(f"attribute {name!r} takes an integer, got the bool {value!r}")
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    try:
        return operator.index(value)
    except TypeError:
        raise IRError(f"attribute {name!r} takes an integer, got {value!r}") from None


def _number(value, name):
    if isinstance(value, (bool, np.bool_)):
        raise IRError(f"attribute {name!r} takes a number, got the bool {value!r}")
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    raise IRError(f"attribute {name!r} takes a number, got {value!r}")


def _boolean(value, name):
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise IRError(f"attribute {name!r} takes a bool, got {value!r}")


# --- constructors: one a kind, so a family file reads like a table ---------------------
def Int(name, default=REQUIRED, *, min=None, max=None, aliases=(), doc=""):  # noqa: N802, A002
    return Attr(name, "int", default, aliases=tuple(aliases), min=min, max=max, doc=doc)


def Float(name, default=REQUIRED, *, min=None, aliases=(), doc=""):  # noqa: N802, A002
    return Attr(name, "float", default, aliases=tuple(aliases), min=min, doc=doc)


def Bool(name, default=REQUIRED, *, words=False, aliases=(), doc=""):  # noqa: N802
    return Attr(name, "bool", default, aliases=tuple(aliases), words=words, doc=doc)


def Str(name, default=REQUIRED, *, aliases=(), doc=""):  # noqa: N802
    return Attr(name, "str", default, aliases=tuple(aliases), doc=doc)


def Enum(name, choices, default=REQUIRED, *, spellings=None, ignore_case=False, aliases=(), doc=""):  # noqa: N802
    return Attr(name, "enum", default, aliases=tuple(aliases), choices=tuple(choices), spellings=dict(spellings or {}),
                ignore_case=ignore_case, doc=doc)


def Ints(name, default=REQUIRED, *, min=None, aliases=(), doc=""):  # noqa: N802, A002
    return Attr(name, "ints", default, aliases=tuple(aliases), min=min, doc=doc)


def Floats(name, default=REQUIRED, *, min=None, aliases=(), doc=""):  # noqa: N802, A002
    return Attr(name, "floats", default, aliases=tuple(aliases), min=min, doc=doc)


def YX(name, default=REQUIRED, *, x=None, y=None, lists=(), write_list=None, nd=None, min=None,  # noqa: N802
       doc=""):  # noqa: A002
    """`nd`: the list attribute a 3-D window is written as (one of `lists`; none: 2-D only)."""
    return Attr(name, "yx", default, x=x or f"{name}-x", y=y or f"{name}-y", lists=tuple(lists),
                write_list=write_list, nd=nd, min=min, doc=doc)
