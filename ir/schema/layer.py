"""LayerSchema: the attributes of one IR layer type, read and written in one place."""
from __future__ import annotations

from ..errors import IRError
from .attribute import REQUIRED, Attr, Same


class SchemaError(IRError):
    """An attribute that does not fit the schema. `detail` is the message without
    the layer's description (callers that add their own prefix use it)."""

    def __init__(self, detail: str, layer=None):
        self.detail = detail
        self.layer_name = getattr(layer, "name", None)
        prefix = f"{describe_layer(layer)}: " if layer is not None else ""
        super().__init__(prefix + detail)


def describe_layer(layer) -> str:
    return f"layer {layer.name!r} (type {layer.type}, id={layer.id})"


class LayerSchema:
    """types: the IR type name(s) (aliases of other IR versions, e.g. SoftMax/Softmax);
    attrs: Attr declarations in the order they are written."""

    def __init__(self, types, attrs: list[Attr], doc: str = ""):
        self.types = (types,) if isinstance(types, str) else tuple(types)
        self.type = self.types[0]
        self.attrs: dict[str, Attr] = {}
        self._by_ir_name: dict[str, Attr] = {}
        for attr in attrs:
            if attr.name in self.attrs:
                raise ValueError(f"{self.type}: attribute {attr.name!r} declared twice")
            self.attrs[attr.name] = attr
            for name in attr.ir_names():
                if name in self._by_ir_name:
                    raise ValueError(f"{self.type}: IR name {name!r} belongs to two attributes")
                self._by_ir_name[name] = attr
        for attr in attrs:
            if isinstance(attr.default, Same) and attr.default.other not in self.attrs:
                raise ValueError(f"{self.type}: {attr.name!r} defaults to unknown {attr.default.other!r}")
        self.doc = doc

    def __repr__(self):
        return f"LayerSchema({self.type!r}, {list(self.attrs)})"

    def ir_names(self) -> set[str]:
        """Every attribute name a <data> element of this type may carry."""
        return set(self._by_ir_name)

    # --- reading ------------------------------------------------------------------------
    def read(self, layer) -> dict:
        """{attribute name: typed value} of an ir.Layer, defaults filled in.

        Unknown attributes are ignored (IRs of other tools carry extra ones); a
        missing required or unparsable attribute is a SchemaError naming the layer."""
        data = layer.data
        values = {}
        for attr in self.attrs.values():
            try:
                value = attr.parse(data)
            except SchemaError:
                raise
            except IRError as err:
                raise SchemaError(err.message, layer) from None
            if value is REQUIRED:
                names = (f"attributes {attr.x!r} and {attr.y!r}" if attr.kind == "yx"
                         else f"attribute {attr.name!r}")
                raise SchemaError(f"missing {names}; the IR is incomplete, convert the model again", layer)
            values[attr.name] = value
        for name, value in values.items():
            if isinstance(value, Same):
                values[name] = values[value.other]
        return self._window_rank(layer, values)

    def _window_rank(self, layer, values: dict) -> dict:
        """A 3-D window's attributes left out take their default on all three axes; a layer
        that gives some of them 2-D and some 3-D is refused."""
        windows = [a for a in self.attrs.values() if a.kind == "yx" and values.get(a.name) is not None]
        given = {len(values[a.name]) for a in windows if any(n in layer.data for n in a.ir_names())}
        if len(given) > 1:
            raise SchemaError("mixes 2-D and 3-D window attributes ({}); convert the model again".format(
                ", ".join(f"{a.name}={list(values[a.name])}" for a in windows)), layer)
        if given == {3}:
            for attr in windows:
                if len(values[attr.name]) == 2:  # a 2-D default: the same value on the third axis
                    values[attr.name] = (values[attr.name][0],) * 3
        return values

    # --- writing ------------------------------------------------------------------------
    def write(self, values: dict) -> dict[str, str]:
        """{IR attribute name: text} for {attribute name: Python value}, in schema order.

        None means "not given" (the attribute is left out). Raises SchemaError for an
        attribute the type does not have, a value of the wrong kind or range, or a
        required attribute left out."""
        unknown = [name for name in values if name not in self.attrs]
        if unknown:
            raise SchemaError(f"IR type {self.type} has no attribute {', '.join(repr(n) for n in unknown)} "
                              f"(its attributes: {', '.join(self.attrs)})")
        out: dict[str, str] = {}
        for name, attr in self.attrs.items():
            value = values.get(name)
            if value is None:
                if attr.required:
                    raise SchemaError(f"IR type {self.type} needs attribute {name!r}")
                continue
            try:
                out.update(attr.format(value))
            except SchemaError:
                raise
            except IRError as err:
                raise SchemaError(f"IR type {self.type}: {err.message}") from None
        return out

    def check(self, data: dict[str, str]) -> list[str]:
        """Problems of written <data> attributes: unknown names, values that do not
        parse or are out of range, required attributes missing. [] when it fits."""
        problems = []
        for name, text in data.items():
            attr = self._by_ir_name.get(name)
            if attr is None:
                problems.append(f"attribute {name!r} is not an attribute of IR type {self.type}")
                continue
            try:
                attr.check_text(name, text)
            except IRError as err:
                problems.append(err.message)
        for attr in self.attrs.values():
            if attr.required and not any(n in data for n in attr.ir_names()):
                problems.append(f"required attribute {attr.x + '/' + attr.y if attr.kind == 'yx' else attr.name!r} "
                                "is missing")
        return problems

    def table(self) -> list[tuple[str, str, str]]:
        """(name, kind, default) rows, for documentation."""
        rows = []
        for attr in self.attrs.values():
            kind = attr.kind if attr.kind != "enum" else "enum: " + "|".join(attr.choices)
            if attr.default is REQUIRED:
                default = "required"
            elif isinstance(attr.default, Same):
                default = f"= {attr.default.other}"
            else:
                default = repr(attr.default)
            rows.append((attr.name, kind, default))
        return rows
