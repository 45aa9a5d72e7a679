"""Helpers shared by the Caffe extractors."""
import numpy as np

from core.errors import FrameworkError
from core.front.caffe.weights import blob_array


def spatial(param, name, name_h, name_w, default):
    """Caffe's spellings of a window parameter: `x_h`/`x_w`, a repeated `x` with one value
    (every axis), two (h, w) or three (d, h, w: a 3-D convolution, Caffe's N-D form), or
    nothing (the default). Returns np.array([h, w]) or np.array([d, h, w])."""
    has_h = name_h and param.HasField(name_h)
    has_w = name_w and param.HasField(name_w)
    if has_h or has_w:
        return np.array([getattr(param, name_h) if has_h else default,
                         getattr(param, name_w) if has_w else default], dtype=np.int64)
    value = getattr(param, name, None)
    if value is None:
        return np.array([default, default], dtype=np.int64)
    if isinstance(value, int):  # Pooling's kernel_size/stride/pad are scalars
        return np.array([value, value], dtype=np.int64) if param.HasField(name) else \
            np.array([default, default], dtype=np.int64)
    values = list(value)
    if not values:
        return np.array([default, default], dtype=np.int64)
    if len(values) == 1:
        return np.array([values[0], values[0]], dtype=np.int64)
    if len(values) in (2, 3):
        return np.array(values, dtype=np.int64)
    raise FrameworkError("Parameter '{}' has {} values; a layer takes 1, 2 or 3 (a 3-D window).", name,
                         len(values))


def uniform_params(param, names: dict) -> tuple:
    """Of `names` ({repeated field: its (_h, _w) fields or ()}), those given by one value or not at all: the same
    on every axis, so they take as many axes as the input has spatial ones (Caffe's num_spatial_axes)."""
    return tuple(name for name, hw in names.items()
                 if len(getattr(param, name)) <= 1 and not any(param.HasField(f) for f in hw))


def layer_blobs(node, expected: int | None = None, at_least: int | None = None) -> list[np.ndarray]:
    """The layer's trained blobs from the caffemodel, checked for presence."""
    blobs = [blob_array(b, node.name) for b in node.soft_get("caffe_blobs") or []]
    need = expected if expected is not None else at_least
    if need and len(blobs) < need:
        raise FrameworkError(
            "Layer '{}' ({}) needs {} weight blob(s) but the .caffemodel has {} for it. Check that the "
            ".caffemodel belongs to this prototxt (layers are matched by name).", node.name, node.caffe_type,
            need, len(blobs), faq=11)
    return blobs
