"""Read an IR v2 (or same-shaped v3) .xml + .bin pair into a Network.

IR files are untrusted input (the daemons load whatever path they are given), so:
sizes are checked before anything is read, the XML is parsed with defusedxml with
DTDs and entities forbidden (no billion laughs, no external entities), and every
number, reference and blob range is validated before it is used. Every problem is
an IRError naming the file, the layer and what to do.
"""

from __future__ import annotations

import mmap
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring as defused_fromstring

from .errors import IRError
from .model import PRECISION_DTYPES, Edge, Layer, Network, Port, describe_layer
from .validate import validate_network

SUPPORTED_VERSIONS = (2, 3)
DEFAULT_MAX_XML_BYTES = 256 * 2**20
DEFAULT_MAX_BIN_BYTES = 4 * 2**30
# XML elements of a topology: GoogLeNet's has ~4,800; a tree of a million takes ~250 MB to build, a file of
# tiny elements within max_xml_bytes would take 6 GB and a quarter of a minute
DEFAULT_MAX_XML_ELEMENTS = 1 << 20

_INT_RE = re.compile(r"\s*[+-]?[0-9]+\s*")
# Blob elements found directly under <layer> in the catalog's older examples.
_LEGACY_BLOB_TAGS = ("weights", "biases")


class _Context:
    """Where we are, for error messages."""

    def __init__(self, xml_path: Path):
        self.where = str(xml_path)

    def error(self, message: str) -> IRError:
        return IRError(message, where=self.where)


def _parse_int(text, what: str, ctx: _Context, *, minimum: int | None = None) -> int:
    if text is None:
        raise ctx.error(f"{what} is missing; the IR is incomplete (regenerate it)")
    if not _INT_RE.fullmatch(text):
        raise ctx.error(f"{what} is {text!r}, not an integer; the IR is damaged or was edited by hand")
    value = int(text)
    if minimum is not None and value < minimum:
        raise ctx.error(f"{what} is {value}, it must be >= {minimum}; the IR is damaged or was edited by hand")
    return value


def _check_size(path: Path, limit: int, kind: str, ctx: _Context, option: str) -> int:
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        raise IRError(f"cannot find the IR {kind} file {path}; check the path "
                      f"(the .xml and .bin must be next to each other unless the .bin is given)",
                      where=ctx.where) from None
    except OSError as err:
        raise IRError(f"cannot access the IR {kind} file {path}: {err.strerror}", where=ctx.where) from None
    if size > limit:
        raise IRError(f"the IR {kind} file {path} is {size} bytes, more than the limit of {limit} bytes; "
                      f"if the file is trusted, raise the limit ({option})", where=ctx.where)
    return size


def _read_limited(path: Path, limit: int, ctx: _Context) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)  # the file may have grown since the stat
    except OSError as err:
        raise ctx.error(f"cannot read {path}: {err.strerror}") from None
    if len(data) > limit:
        raise ctx.error(f"the IR file {path} is larger than the limit of {limit} bytes (max_xml_bytes)")
    return data


def _parse_xml(data: bytes, ctx: _Context) -> ET.Element:
    try:
        return defused_fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as err:
        raise ctx.error(f"the file contains a DTD or entity declaration ({type(err).__name__}), which IR files "
                        "never have; refusing to parse it (it may be an XML bomb or try to read other files)") from None
    except ET.ParseError as err:
        line, column = getattr(err, "position", (None, None))
        raise ctx.error(f"not well-formed XML at line {line}, column {column} ({err}); "
                        "the IR is damaged or truncated, regenerate it") from None


def _parse_ports(container: ET.Element | None, what: str, ctx: _Context) -> list[Port]:
    ports: list[Port] = []
    if container is None:
        return ports
    for port_el in container.findall("port"):
        port_id = _parse_int(port_el.get("id"), f"{what}: port id", ctx, minimum=0)
        dims = tuple(
            _parse_int(dim.text, f"{what}: port {port_id} dimension {n}", ctx, minimum=0)
            for n, dim in enumerate(port_el.findall("dim"))
        )
        ports.append(Port(port_id, dims))
    return ports


def _layer_data(layer_el: ET.Element, what: str, ctx: _Context) -> dict[str, str]:
    # <data> of IR v2, or the catalog's older <convolution_data>, <fc_data>, ...
    data: dict[str, str] = {}
    for child in layer_el:
        if child.tag == "data" or (isinstance(child.tag, str) and child.tag.endswith("_data")):
            for key, value in child.attrib.items():
                if key in data and data[key] != value:
                    raise ctx.error(f"{what}: attribute {key!r} is given twice with different values "
                                    f"({data[key]!r} and {value!r}) in its data elements")
                data[key] = value
    return data


def _blob_elements(layer_el: ET.Element) -> list[ET.Element]:
    blobs = []
    for child in layer_el:
        if child.tag == "blobs":
            blobs.extend(child)
        elif child.tag in _LEGACY_BLOB_TAGS:
            blobs.append(child)
    return blobs


class _Bin:
    """The .bin, opened lazily (an IR without blobs needs no .bin) and memory-mapped."""

    def __init__(self, path: Path, limit: int, ctx: _Context):
        self.path, self.limit, self.ctx = path, limit, ctx
        self._buffer = None

    @property
    def buffer(self):
        if self._buffer is None:
            size = _check_size(self.path, self.limit, "weights (.bin)", self.ctx, "max_bin_bytes")
            if size == 0:
                self._buffer = b""
            else:
                try:
                    with open(self.path, "rb") as f:
                        # Read-only map: arrays made from it are read-only views, and the
                        # writer replaces files by rename, so a mapped .bin never changes.
                        self._buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                except (OSError, ValueError) as err:
                    raise self.ctx.error(f"cannot read the weights file {self.path}: {err}") from None
                if len(self._buffer) > self.limit:
                    raise self.ctx.error(f"the weights file {self.path} is larger than the limit of "
                                         f"{self.limit} bytes (max_bin_bytes)")
        return self._buffer


def _read_blob(blob_el: ET.Element, layer: Layer, what: str, binfile: _Bin, ctx: _Context) -> np.ndarray:
    name = blob_el.tag
    offset = _parse_int(blob_el.get("offset"), f"{what}: blob <{name}> offset", ctx, minimum=0)
    size = _parse_int(blob_el.get("size"), f"{what}: blob <{name}> size", ctx, minimum=0)
    dtype = PRECISION_DTYPES[layer.precision]
    if size % dtype.itemsize:
        raise ctx.error(f"{what}: blob <{name}> size {size} is not a multiple of {dtype.itemsize} bytes, the "
                        f"element size of its precision {layer.precision}; the IR is damaged or the precision "
                        "attribute is wrong")
    buffer = binfile.buffer
    if offset + size > len(buffer):
        raise ctx.error(f"{what}: blob <{name}> (offset {offset}, size {size}) ends at byte {offset + size}, "
                        f"beyond the end of {binfile.path} ({len(buffer)} bytes); the .bin does not belong to "
                        "this .xml or is truncated")
    return np.frombuffer(buffer, dtype=dtype, count=size // dtype.itemsize, offset=offset)


def _parse_layer(layer_el: ET.Element, binfile: _Bin, ctx: _Context) -> Layer:
    raw_id, name = layer_el.get("id"), layer_el.get("name")
    if raw_id is None:
        raise ctx.error(f"layer {name!r} has no id attribute; every layer needs a unique integer id")
    layer_id = _parse_int(raw_id, f"id of layer {name!r}", ctx, minimum=0)
    what = describe_layer(layer_id, name)
    if name is None:
        raise ctx.error(f"{what} has no name attribute")
    layer_type = layer_el.get("type")
    if not layer_type:
        raise ctx.error(f"{what} has no type attribute")
    precision = layer_el.get("precision")
    if precision not in PRECISION_DTYPES:
        problem = "no precision attribute" if precision is None else f"unknown precision {precision!r}"
        raise ctx.error(f"{what} has {problem}; supported precisions are {', '.join(PRECISION_DTYPES)}")

    layer = Layer(id=layer_id, name=name, type=layer_type, precision=precision,
                  data=_layer_data(layer_el, what, ctx))
    for tag, ports in (("input", layer.inputs), ("output", layer.outputs)):
        for container in layer_el.findall(tag):
            ports.extend(_parse_ports(container, what, ctx))
    for blob_el in _blob_elements(layer_el):
        if not isinstance(blob_el.tag, str):
            continue  # comments / processing instructions
        if blob_el.tag in layer.blobs:
            raise ctx.error(f"{what} has two blobs named <{blob_el.tag}>")
        layer.blobs[blob_el.tag] = _read_blob(blob_el, layer, what, binfile, ctx)
    return layer


def _parse_edges(root: ET.Element, ctx: _Context) -> list[Edge]:
    edges = []
    for edges_el in root.findall("edges"):
        for n, edge_el in enumerate(edges_el.findall("edge")):
            values = [
                _parse_int(edge_el.get(attr), f"edge #{n} attribute {attr}", ctx, minimum=0)
                for attr in ("from-layer", "from-port", "to-layer", "to-port")
            ]
            edges.append(Edge(*values))
    return edges


def _parse_results(root: ET.Element, ctx: _Context) -> list[tuple[int, int]]:
    """<results><result layer= port=/>: model outputs that layers also read."""
    return [(_parse_int(el.get("layer"), f"result #{n} attribute layer", ctx, minimum=0),
             _parse_int(el.get("port"), f"result #{n} attribute port", ctx, minimum=0))
            for results_el in root.findall("results") for n, el in enumerate(results_el.findall("result"))]


def _parse_meta(root: ET.Element) -> dict[str, str]:
    meta = {}
    for meta_el in root.findall("meta_data"):
        for param in meta_el.findall("param"):
            key = param.get("key")
            if key is not None:
                meta[key] = param.get("value", "")
    return meta


def read_ir(xml_path, bin_path=None, *, max_xml_bytes: int = DEFAULT_MAX_XML_BYTES,
            max_bin_bytes: int = DEFAULT_MAX_BIN_BYTES, max_xml_elements: int = DEFAULT_MAX_XML_ELEMENTS) -> Network:
    """Parse and validate an IR. Blobs are read-only 1-D views into the mapped .bin,
    of dtype float32 or float16 as the layer's precision says (integer blobs come
    back as that float dtype too: IR v2 does not record blob types; use .view())."""
    xml_path = Path(xml_path)
    bin_path = xml_path.with_suffix(".bin") if bin_path is None else Path(bin_path)
    ctx = _Context(xml_path)

    _check_size(xml_path, max_xml_bytes, "topology (.xml)", ctx, "max_xml_bytes")
    data = _read_limited(xml_path, max_xml_bytes, ctx)
    elements = data.count(b"<") - data.count(b"</")  # (start tags, and comments: at least the elements)
    if elements > max_xml_elements:
        raise ctx.error(f"the topology has about {elements} XML elements, more than the limit of {max_xml_elements} "
                        "(max_xml_elements; GoogLeNet's has ~4,800): the IR is damaged or not an IR")
    root = _parse_xml(data, ctx)
    if root.tag != "net":
        raise ctx.error(f"not an IR file: the root element is <{root.tag}>, an IR .xml starts with <net>")

    version = _parse_int(root.get("version"), "the <net> version attribute", ctx)
    if version not in SUPPORTED_VERSIONS:
        raise ctx.error(f"IR version {version} is not supported (supported: "
                        f"{', '.join(map(str, SUPPORTED_VERSIONS))}); convert the model again with this tool")
    batch_text = root.get("batch")
    batch = 1 if batch_text is None else _parse_int(batch_text, "the <net> batch attribute", ctx, minimum=1)

    layers_el = root.find("layers")
    if layers_el is None:
        raise ctx.error("the <net> has no <layers> element; the IR is incomplete")
    binfile = _Bin(bin_path, max_bin_bytes, ctx)
    layers = [_parse_layer(el, binfile, ctx) for el in layers_el.findall("layer")]
    if not layers:
        raise ctx.error("the <layers> element holds no <layer>: an IR has at least an input; regenerate it")

    net = Network(name=root.get("name", ""), layers=layers, edges=_parse_edges(root, ctx),
                  batch=batch, version=version, meta=_parse_meta(root), results=_parse_results(root, ctx))
    validate_network(net, where=ctx.where)
    return net
