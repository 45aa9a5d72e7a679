"""PriorBox semantics shared by the producer (core) and consumers (daemons) of IR."""


def prior_box_aspect_ratios(aspect_ratio, flip) -> list[float]:
    """SSD's list of ratios: 1, then each new ratio (and its inverse when flipping)."""
    ratios = [1.0]
    for ar in aspect_ratio:
        if any(abs(ar - r) < 1e-6 for r in ratios):
            continue
        ratios.append(float(ar))
        if flip:
            ratios.append(1.0 / float(ar))
    return ratios
