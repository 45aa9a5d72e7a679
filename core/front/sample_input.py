"""User sample inputs: --fallback_input (the shape-inference fallbacks run the
framework on it instead of noise) and --validate_input (`convert --validate`).

A `.npy` file is the model's only input; a `.npz` file maps input names to
arrays. Arrays are in the framework's layout (NHWC for TensorFlow), as
--input_shape is. Read without pickle, with a size limit.
"""
from __future__ import annotations

import os
import zipfile

import numpy as np

from core.errors import Error

MAX_BYTES = 4 << 30


def load_sample_inputs(path: str, option: str, input_names: list[str]) -> dict[str, np.ndarray]:
    """{input name: array} for the model's inputs `input_names`."""
    if not os.path.isfile(path):
        raise Error("{} '{}' does not exist or is not a file: give a .npy file (the model's only input) or a .npz "
                    "file (input name -> array).", option, path)
    if os.path.getsize(path) > MAX_BYTES:
        raise Error("{} '{}' is larger than {} bytes.", option, path, MAX_BYTES)
    try:
        loaded = np.load(path, allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise Error("{} '{}' is not a numpy .npy/.npz file of numbers: {}", option, path, exc) from None
    if isinstance(loaded, np.ndarray):
        if len(input_names) != 1:
            raise Error("{} '{}' holds one array, but the model has {} inputs ({}): give a .npz file with an array "
                        "per input name.", option, path, len(input_names), ", ".join(input_names))
        arrays = {input_names[0]: loaded}
    else:
        with loaded:
            arrays = {key: loaded[key] for key in loaded.files}
        unknown = sorted(set(arrays) - set(input_names))
        if unknown:
            raise Error("{} '{}' has arrays for {}, which the model has no input of that name; its inputs are {}.",
                        option, path, ", ".join(unknown), ", ".join(input_names))
    for name, array in arrays.items():
        if array.dtype.kind not in "biuf":
            raise Error("{} '{}': the array for input '{}' holds {} values; inputs are numbers.", option, path, name,
                        array.dtype)
    return arrays
