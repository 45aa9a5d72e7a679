"""Write a Network as an IR v2 .xml + .bin pair.

The XML is produced by hand rather than by an XML library so that it matches the
reference examples byte for byte (declaration, attribute order, 4-space indent).
The .bin is the blobs back to back with identical blobs stored once.
Both files appear atomically: a failed run leaves no output and never damages an
earlier IR at the same path.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import IRError
from .model import PRECISION_DTYPES, Layer, Network, describe_layer
from .precision import to_float16
from .validate import validate_network

SUPPORTED_VERSIONS = (2, 3)

# XML 1.0 cannot carry these characters at all, even escaped.
_INVALID_XML_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# Attribute keys and blob names become XML names; keep to a safe ASCII subset.
_XML_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
# Tab/newline/CR are escaped as character references, otherwise XML attribute
# normalisation would turn them into spaces and the value would not round-trip.
_ATTR_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;",
                 "\t": "&#9;", "\n": "&#10;", "\r": "&#13;"}
_ATTR_ESCAPE_RE = re.compile("[&<>\"\t\n\r]")


@dataclass
class _BlobPlacement:
    offset: int
    size: int


@dataclass
class _BinPlan:
    placements: dict[tuple[int, str], _BlobPlacement]  # (layer id, blob name) -> where
    chunks: list[np.ndarray]                            # unique blobs, in file order
    size: int
    warnings: list[str]


def _escape_attr(value: str, what: str) -> str:
    if _INVALID_XML_CHARS.search(value):
        raise IRError(f"{what} contains a control character that XML cannot represent: {value!r}")
    return _ATTR_ESCAPE_RE.sub(lambda m: _ATTR_ESCAPES[m.group()], value)


def _check_precision(precision: str | None) -> None:
    if precision is not None and precision not in PRECISION_DTYPES:
        raise IRError(f"unknown IR precision {precision!r}; use one of {', '.join(PRECISION_DTYPES)}")


def _layer_precision(layer: Layer, precision: str | None) -> str:
    # A forced precision applies to every layer; otherwise each layer keeps its own
    # (the converter's precision pass sets them, and converts the blobs, already).
    return precision or layer.precision


def _blob_as_stored(layer: Layer, blob_name: str, blob, precision: str, warnings: list[str]) -> np.ndarray:
    """The blob as it goes into the .bin: flat, C order, in the layer's precision."""
    values = np.asarray(blob)
    kind = values.dtype.kind
    if kind == "f":
        target = PRECISION_DTYPES[_layer_precision(layer, precision)]
        if target == np.float16 and values.dtype != np.float16:
            values = to_float16(values, layer.name, warnings)
        else:
            values = values.astype(target, copy=False)
    elif kind not in "iu":
        raise IRError(f"blob {blob_name!r} of {describe_layer(layer.id, layer.name)} has dtype {values.dtype}; "
                      "IR blobs are float or integer arrays")
    # Integer blobs (e.g. int32 indices) are stored as they are.
    return np.ascontiguousarray(values).reshape(-1)


def _plan_bin(net: Network, precision: str) -> _BinPlan:
    """Place every blob in the .bin, storing identical bytes once."""
    placements: dict[tuple[int, str], _BlobPlacement] = {}
    chunks: list[np.ndarray] = []
    by_digest: dict[bytes, list[tuple[np.ndarray, int]]] = {}
    warnings: list[str] = []
    end = 0
    for layer in net.layers:
        for blob_name, blob in layer.blobs.items():
            if not _XML_NAME.fullmatch(blob_name):
                raise IRError(f"blob name {blob_name!r} of {describe_layer(layer.id, layer.name)} is not a "
                              "valid XML element name; use letters, digits, '_', '-', '.'")
            stored = _blob_as_stored(layer, blob_name, blob, precision, warnings)
            raw = stored.view(np.uint8)
            digest = hashlib.blake2b(raw.data, digest_size=16).digest()
            offset = None
            # The digest only finds candidates; bytes are compared for real.
            for other, other_offset in by_digest.get(digest, ()):
                if np.array_equal(other, raw):
                    offset = other_offset
                    break
            if offset is None:
                offset = end
                by_digest.setdefault(digest, []).append((raw, offset))
                chunks.append(raw)
                end += raw.size
            placements[(layer.id, blob_name)] = _BlobPlacement(offset, raw.size)
    return _BinPlan(placements, chunks, end, warnings)


def _render_xml(net: Network, precision: str, plan: _BinPlan) -> str:
    out = ['<?xml version="1.0" ?>']
    add = out.append
    add(f'<net batch="{int(net.batch)}" name="{_escape_attr(net.name, "network name")}" version="{int(net.version)}">')
    add("    <layers>")
    for layer in net.layers:
        what = describe_layer(layer.id, layer.name)
        if not isinstance(layer.name, str) or not isinstance(layer.type, str) or not layer.type:
            raise IRError(f"{what} needs a string name and a non-empty string type")
        add(f'        <layer id="{int(layer.id)}" name="{_escape_attr(layer.name, f"name of {what}")}" '
            f'precision="{_layer_precision(layer, precision)}" type="{_escape_attr(layer.type, f"type of {what}")}">')
        if layer.data:
            attrs = []
            for key, value in layer.data.items():
                if not isinstance(key, str) or not _XML_NAME.fullmatch(key):
                    raise IRError(f"attribute name {key!r} of {what} is not a valid XML name")
                if not isinstance(value, str):
                    raise IRError(f"attribute {key!r} of {what} is {value!r} ({type(value).__name__}), "
                                  "not a string; format it with ir.fmt_value")
                attrs.append(f'{key}="{_escape_attr(value, f"attribute {key!r} of {what}")}"')
            add(f"            <data {' '.join(attrs)}/>")
        for tag, ports in (("input", layer.inputs), ("output", layer.outputs)):
            if not ports:
                continue
            add(f"            <{tag}>")
            for port in ports:
                add(f'                <port id="{int(port.id)}">')
                for d in port.dims:
                    add(f"                    <dim>{int(d)}</dim>")
                add("                </port>")
            add(f"            </{tag}>")
        if layer.blobs:
            add("            <blobs>")
            for blob_name in layer.blobs:
                place = plan.placements[(layer.id, blob_name)]
                add(f'                <{blob_name} offset="{place.offset}" size="{place.size}"/>')
            add("            </blobs>")
        add("        </layer>")
    add("    </layers>")
    add("    <edges>")
    for e in net.edges:
        add(f'        <edge from-layer="{int(e.from_layer)}" from-port="{int(e.from_port)}" '
            f'to-layer="{int(e.to_layer)}" to-port="{int(e.to_port)}"/>')
    add("    </edges>")
    if net.results:
        add("    <results>")
        for layer, port in net.results:
            add(f'        <result layer="{int(layer)}" port="{int(port)}"/>')
        add("    </results>")
    if net.meta:
        add("    <meta_data>")
        for key, value in net.meta.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise IRError(f"meta data {key!r}={value!r} must be a pair of strings")
            add(f'        <param key="{_escape_attr(key, "meta data key")}" '
                f'value="{_escape_attr(value, f"meta data {key!r}")}"/>')
        add("    </meta_data>")
    add("</net>")
    return "\n".join(out) + "\n"


def _check_network(net: Network, precision: str) -> None:
    _check_precision(precision)
    if net.version not in SUPPORTED_VERSIONS:
        raise IRError(f"cannot write IR version {net.version}; supported: {SUPPORTED_VERSIONS}")
    validate_network(net)


def to_xml_string(net: Network, precision: str | None = None) -> str:
    """The .xml text write_ir would produce (blob offsets included)."""
    _check_network(net, precision)
    return _render_xml(net, precision, _plan_bin(net, precision))


# ---- atomic file output --------------------------------------------------------

def _write_chunk(f, chunk: np.ndarray) -> None:
    """Append one blob to the .bin (a seam tests use to fail mid-write)."""
    f.write(memoryview(chunk))


def _side_name(final_name: str, suffix: str) -> str:
    """A hidden name next to the final file: `.<name>.<pid>.<12 hex>.<tmp|old>`. The
    pid tells a later run whether the writer that left it is still alive."""
    return f".{final_name}.{os.getpid()}.{secrets.token_hex(6)}.{suffix}"


def remove_stale_side_files(directory: Path, final_name: str) -> list[Path]:
    """Removes temp/backup files of `final_name` that a killed writer left behind
    (its pid is gone). Files of writers still running are kept. Returns the removed."""
    pattern = re.compile(rf"\.{re.escape(final_name)}\.(\d+)\.[0-9a-f]{{12}}\.(tmp|old)")
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        match = pattern.fullmatch(name)
        if match and not _alive(int(match.group(1))):
            path = directory / name
            try:
                if path.is_file() and not path.is_symlink():
                    path.unlink()
                    removed.append(path)
            except OSError:
                pass
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process (or a bogus pid): leave its files alone
    return True


def _create_temp(directory: Path, final_name: str):
    """A new file next to the final one (same filesystem, so os.replace is atomic).

    Not tempfile: that creates mode 0600, the IR should get the usual umask mode.
    """
    while True:
        path = directory / _side_name(final_name, "tmp")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        return path, os.fdopen(fd, "wb")


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # not supported everywhere; the data itself is already synced
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_quietly(path: Path | None) -> None:
    if path is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def write_ir(net: Network, xml_path, bin_path=None, precision: str | None = None) -> list[str]:
    """Write `net` as xml_path + bin_path (default: xml_path with suffix .bin).

    Each layer is written in its own precision, float blobs stored in its dtype.
    `precision` ("FP32"/"FP16") forces one precision on every layer of a network
    built by hand (the converter's precision pass already did that for its own).
    Returns the warnings (float16 clipping, FAQ #75/#76).
    """
    xml_path = Path(xml_path)
    bin_path = xml_path.with_suffix(".bin") if bin_path is None else Path(bin_path)
    where = str(xml_path)
    if xml_path.resolve() == bin_path.resolve():
        raise IRError(f"the .xml and .bin paths are the same file ({bin_path}); give them different names")
    try:
        _check_network(net, precision)
        plan = _plan_bin(net, precision)
        xml_bytes = _render_xml(net, precision, plan).encode("utf-8")
    except IRError as err:
        err.where = err.where or where
        raise

    write_pair_atomically(xml_path, bin_path, xml_bytes, plan.chunks)
    return plan.warnings


def write_file_atomically(path, data: bytes) -> None:
    """One file all at once: a hidden temporary next to it (same naming and stale-file
    clean-up as the IR's), synced, then renamed over it; an existing file keeps its
    mode. A failure leaves the earlier file as it was."""
    path = Path(path)
    remove_stale_side_files(path.parent, path.name)
    tmp = None
    try:
        tmp, f = _create_temp(path.parent, path.name)
        with f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
        tmp = None
        _fsync_dir(path.parent)
    finally:
        _remove_quietly(tmp)


def write_pair_atomically(xml_path: Path, bin_path: Path, xml_bytes: bytes, chunks) -> None:
    """Writes the .bin (the chunks back to back) and the .xml so that both appear at
    once: a failure leaves neither and never damages an earlier pair at these paths."""
    where = str(xml_path)
    for directory in {xml_path.parent, bin_path.parent}:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise IRError(f"Failed to create directory {directory}. {err.strerror or err}! "
                          "Make sure you have permission to create it or choose another output directory",
                          faq=21) from None

    for directory, final in ((bin_path.parent, bin_path.name), (xml_path.parent, xml_path.name)):
        remove_stale_side_files(directory, final)
    tmp_xml = tmp_bin = backup = None
    try:
        tmp_bin, f = _create_temp(bin_path.parent, bin_path.name)
        with f:
            for chunk in chunks:
                _write_chunk(f, chunk)
            f.flush()
            os.fsync(f.fileno())
        tmp_xml, f = _create_temp(xml_path.parent, xml_path.name)
        with f:
            f.write(xml_bytes)
            f.flush()
            os.fsync(f.fileno())
        # Two renames cannot be one atomic step. Keep a hard link to the old .bin so
        # that if the .xml rename fails the old pair can be put back together.
        had_bin = bin_path.exists()
        if had_bin:
            backup = bin_path.parent / _side_name(bin_path.name, "old")
            try:
                os.link(bin_path, backup)
            except OSError:
                backup = None
        os.replace(tmp_bin, bin_path)
        tmp_bin = None
        try:
            os.replace(tmp_xml, xml_path)
            tmp_xml = None
        except BaseException:
            if backup is not None:
                os.replace(backup, bin_path)
                backup = None
            elif not had_bin:
                _remove_quietly(bin_path)
            raise
        _fsync_dir(xml_path.parent)
        if bin_path.parent != xml_path.parent:
            _fsync_dir(bin_path.parent)
    except OSError as err:
        raise IRError(f"cannot write the IR: {err}. Check free space and permissions of the output directory",
                      where=where) from err
    finally:
        # On success these are None except the backup link, which is no longer needed.
        _remove_quietly(tmp_bin)
        _remove_quietly(tmp_xml)
        _remove_quietly(backup)
