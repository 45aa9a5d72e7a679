"""Output size of Caffe's Interp layer (the PSPNet/DeepLab fork), shared by the
converter's shape function and the kernels so both follow the same rules.

The rules are tried in the reference Model Optimizer's order: shrink only, zoom
only, height and width, then shrink and zoom, on the input cropped (or padded) by
pad_beg + pad_end. Zooming has two definitions (reference FAQ #96): `multiply`,
out = in * zoom, the Model Optimizer's default, and `deeplab`, out = in + (in - 1) *
(zoom - 1), DeepLab-Caffe's (and OpenCV's); a model is trained with one of them.
"""
from __future__ import annotations

ZOOM_RULES = ("multiply", "deeplab")


def interp_output_size(in_h: int, in_w: int, *, height: int = 0, width: int = 0, zoom_factor: int = 1,
                       shrink_factor: int = 1, pad_beg: int = 0, pad_end: int = 0,
                       zoom_rule: str = "multiply") -> tuple[int, int]:
    """(out_h, out_w); ValueError says why there is none."""
    if zoom_rule not in ZOOM_RULES:
        raise ValueError(f"zoom rule {zoom_rule!r} is not one of {', '.join(ZOOM_RULES)}")
    h, w = in_h + pad_beg + pad_end, in_w + pad_beg + pad_end
    if h <= 0 or w <= 0:
        raise ValueError(f"the padding {pad_beg}, {pad_end} leaves no input of {in_h}x{in_w}")

    def zoom(size):
        return size * zoom_factor if zoom_rule == "multiply" else size + (size - 1) * (zoom_factor - 1)

    def shrink(size):
        return (size - 1) // shrink_factor + 1

    if shrink_factor != 1 and zoom_factor == 1:
        h, w = shrink(h), shrink(w)
    elif zoom_factor != 1 and shrink_factor == 1:
        h, w = zoom(h), zoom(w)
    elif height and width:
        h, w = height, width
    elif shrink_factor != 1 and zoom_factor != 1:
        # both: shrink, then zoom the DeepLab way (the reference does so whatever the rule)
        h, w = shrink(h), shrink(w)
        h, w = h + (h - 1) * (zoom_factor - 1), w + (w - 1) * (zoom_factor - 1)
    if h <= 0 or w <= 0:
        raise ValueError(f"the output size {h}x{w} is empty")
    return h, w
