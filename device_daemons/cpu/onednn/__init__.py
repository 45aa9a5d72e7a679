"""The oneDNN backend of the CPU daemon: oneDNN 3.x through its C API (cffi, ABI
mode), chosen per layer, numpy for the rest (device_daemons/cpu/backends.py).

library.py     loading the library and its declarations
primitives.py  memory descriptors, memory objects, primitive descriptors, primitives
op.py          the op interface, registry and the per-network weights cache
convolution.py, pooling.py, normalization.py, fully_connected.py, eltwise.py,
concat.py, reshape.py, permute.py, slices.py (Crop, Split)  one op family a file
roi_crop.py    ROIPooling bilinear (CropAndResize): our C kernel among the oneDNN steps,
               channels last
patterns.py    sub-graphs run as one step (hard-swish, swish, broadcast Eltwise over Tile)
compiler.py    plan -> program: per-layer choice, fusing, layouts, reorders
sequence.py    runs of consecutive oneDNN steps executed by one C call
arena.py       static memory planning of the tensors
"""
