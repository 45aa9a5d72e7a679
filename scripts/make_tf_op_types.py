"""Writes core/front/tf/op_types.py: TensorFlow's own type rules (from its op registry)
for the op types the converter's TensorFlow front end extracts (core/front/tf/ops/),
so that a graph TensorFlow itself refuses (Conv2D with T=int64, a float Reshape
shape, a string tensor into Relu) is refused at conversion too, without TensorFlow.

    python scripts/make_tf_op_types.py      (with TensorFlow installed; re-run when the
                                             front end learns new op types)
"""
from __future__ import annotations

import os
import pprint
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main():
    import tensorflow as tf
    from tensorflow.python.framework import op_def_registry

    from core.front.tf.ops import TF_OPS  # noqa: F401 (registers every op family)
    rules = {}
    for op in sorted(set(TF_OPS) | {"Placeholder", "PlaceholderWithDefault", "Const"}):
        op_def = op_def_registry.get(op)
        if op_def is None:
            continue
        attrs = {a.name: tuple(sorted(a.allowed_values.list.type)) for a in op_def.attr
                 if a.type == "type" and a.allowed_values.list.type}
        inputs = []
        for arg in op_def.input_arg:
            if arg.number_attr or arg.type_list_attr:
                inputs.append(None)  # a list: positions after it are not mapped
                break
            inputs.append(arg.type_attr or int(arg.type))
        first = op_def.output_arg[0] if op_def.output_arg else None
        output = None if first is None or first.number_attr or first.type_list_attr else (
            first.type_attr or int(first.type))
        rules[op] = {"attrs": attrs, "inputs": tuple(inputs), "output": output}
    names = {int(v): tf.dtypes.as_dtype(v).name for v in range(1, 24) if _valid(tf, v)}
    text = ('"""TensorFlow {}\'s type rules for the op types the TensorFlow front end extracts: for\n'
            'each, the types each type attribute may take, the type (a fixed enum, or the\n'
            'attribute that holds it) of each input up to the first list input, and of its\n'
            'first output. Made by\n'
            'scripts/make_tf_op_types.py from TensorFlow\'s op registry; checked in\n'
            'core/front/tf/extract.py."""\n\nOP_TYPES = {}\n\nDTYPE_NAMES = {}\n'.format(
                tf.__version__, pprint.pformat(rules, width=110, compact=True), pprint.pformat(names, width=110)))
    with open(os.path.join(REPO, "core", "front", "tf", "op_types.py"), "w") as f:
        f.write(text)


def _valid(tf, v):
    try:
        tf.dtypes.as_dtype(v)
        return True
    except TypeError:
        return False


if __name__ == "__main__":
    main()
