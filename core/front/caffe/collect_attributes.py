"""A Caffe parameter message -> IR attributes, for layers registered in
CustomLayersMapping.xml with hasParam="true".

Rules (the legacy Model Optimizer's):
- enums are written by name, qualified like the catalog's examples
  ("caffe.PriorBoxParameter.CENTER_SIZE"); bools as 1/0; repeated fields
  comma-joined; strings as they are;
- by default an optional field that is not set and has no default in caffe.proto
  is omitted; --disable_omitting_optional writes it with its zero value;
- nested messages are left out unless --enable_flattening_nested_params, which
  merges their fields into the layer's (prefixed with the nested field's name on a
  clash);
- names that clash with the IR layer's own attributes (id, name, type, precision,
  version) are renamed `<param>_<name>`, e.g. resample_param.type -> resample_type.
"""
from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor

from ir.attrs import fmt_value

RESERVED = {"id", "name", "type", "precision", "version"}


def _scalar(field, value) -> str:
    if field.type == FieldDescriptor.TYPE_ENUM:
        enum = field.enum_type
        parent = enum.containing_type.name + "." if enum.containing_type is not None else ""
        return "caffe.{}{}".format(parent, enum.values_by_number[value].name) if value in enum.values_by_number \
            else str(value)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return "1" if value else "0"
    if field.type in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES):
        return value if isinstance(value, str) else value.decode("utf-8", "replace")
    return fmt_value(value)


def _has_default(field) -> bool:
    return field.has_default_value


def is_repeated(field) -> bool:
    """protobuf >= 5 has is_repeated (and deprecates `label`); 4.21 only has `label`."""
    if hasattr(field, "is_repeated"):
        return field.is_repeated
    return field.label == FieldDescriptor.LABEL_REPEATED


def collect_attributes(message, disable_omitting_optional=False, enable_flattening_nested_params=False,
                       prefix: str = "") -> dict[str, str]:
    attrs: dict[str, str] = {}
    for field in message.DESCRIPTOR.fields:
        repeated = is_repeated(field)
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if not enable_flattening_nested_params or repeated:
                continue
            if not message.HasField(field.name) and not disable_omitting_optional:
                continue
            nested = collect_attributes(getattr(message, field.name), disable_omitting_optional, True)
            for key, value in nested.items():
                attrs[key if key not in attrs else "{}_{}".format(field.name, key)] = value
            continue
        if repeated:
            values = list(getattr(message, field.name))
            if not values and not disable_omitting_optional:
                continue
            attrs[field.name] = ",".join(_scalar(field, v) for v in values)
            continue
        if not message.HasField(field.name) and not _has_default(field) and not disable_omitting_optional:
            continue
        attrs[field.name] = _scalar(field, getattr(message, field.name))
    return attrs


def rename_reserved(attrs: dict[str, str], param_name: str) -> dict[str, str]:
    stem = param_name[:-len("_param")] if param_name.endswith("_param") else param_name
    return {("{}_{}".format(stem, k) if k in RESERVED else k): v for k, v in attrs.items()}
