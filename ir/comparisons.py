"""What Eltwise's comparisons compute (1.0 where it holds, else 0.0, as the reference's IR had them from v5):
the converter's constant folding and the CPU kernel use these; the schema lists their names."""
from __future__ import annotations

import numpy as np

COMPARE = {"less": np.less, "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
           "equal": np.equal, "not_equal": np.not_equal}
