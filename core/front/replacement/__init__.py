"""Sub-graph replacement: the reference guide's replacer API (one import for all).

    from core.front.replacement import FrontReplacementOp, FrontReplacementSubgraph, \
        FrontReplacementFromConfigFileSubGraph, SubgraphMatch

replacers.py (op and pattern replacers), config_replacers.py (configuration-file
replacers), pattern.py (isomorphism patterns), match.py (scope and points
matching, SubgraphMatch), view.py (the graph's front form), runner.py (the
pipeline step).
"""
from core.front.replacement.config_replacers import (  # noqa: F401
    FrontReplacementFromConfigFileGeneral, FrontReplacementFromConfigFileOp, FrontReplacementFromConfigFileSubGraph,
)
from core.front.replacement.match import SubgraphMatch  # noqa: F401
from core.front.replacement.pattern import apply_pattern, find_pattern_matches  # noqa: F401
from core.front.replacement.replacers import (  # noqa: F401
    FrontReplacementOp, FrontReplacementPattern, FrontReplacementSubgraph,
)
