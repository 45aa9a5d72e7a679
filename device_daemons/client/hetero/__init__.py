"""HETERO: one network over several devices (split.py: affinity and sub-networks).
Imports no device code: the client runs each part on its device's daemon."""
from .split import HeteroError, Part, Split, assign_affinity, parse_hetero, run_split, split_network

__all__ = ["HeteroError", "Part", "Split", "assign_affinity", "parse_hetero", "run_split", "split_network"]
