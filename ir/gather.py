"""Gather's output shape (np.take along one axis of a constant dictionary): shared by the converter and the
daemons."""
from __future__ import annotations


def gather_shape(dims, axis: int, indices) -> tuple[int, ...]:
    """The dims of the entries of a dictionary of `dims` taken along `axis` at indices of shape `indices`."""
    dims = tuple(int(d) for d in dims)
    return dims[:axis] + tuple(int(d) for d in indices) + dims[axis + 1:]
