"""Gather's output shape and values (np.take along one axis, with TensorFlow's batch_dims): shared by the
converter and the daemons."""
from __future__ import annotations

import numpy as np


def gather_shape(dims, axis: int, indices, batch_dims: int = 0) -> tuple[int, ...]:
    """The dims of the entries of a dictionary of `dims` taken along `axis` at indices of shape `indices`; the
    first `batch_dims` axes of both are a batch (each batch's indices index its own dictionary)."""
    dims = tuple(int(d) for d in dims)
    return dims[:axis] + tuple(int(d) for d in indices)[batch_dims:] + dims[axis + 1:]


def take(table, indices, axis: int, batch_dims: int = 0):
    """np.take with TensorFlow's (and Gather-8's) batch_dims: gather_shape's result."""
    if not batch_dims:
        return np.take(table, indices, axis=axis)
    batch = table.shape[:batch_dims]
    flat_table = table.reshape((-1,) + table.shape[batch_dims:])
    flat_indices = indices.reshape((-1,) + indices.shape[batch_dims:])
    parts = [np.take(t, i, axis=axis - batch_dims) for t, i in zip(flat_table, flat_indices)]
    return np.stack(parts).reshape(batch + parts[0].shape)
