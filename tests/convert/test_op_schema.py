"""core/ops write IR attributes through ir/schema (the one declaration the kernels read)."""
import numpy as np
import pytest

import core.ops  # noqa: F401  (registers the built-in ops)
from core.emit import to_network
from core.errors import Error
from core.graph.graph import Graph
from core.ops.op import Op, SchemaAttrs, ir_attrs
from ir.schema import layer_schema

# ops that never reach the IR (removed or lowered by passes) or carry no attributes
_NO_ATTRS = {"Identity", "Silence", "Parameter", "ScaleShift", "Mul", "Add"}


def builtin_ops():
    return sorted((name, cls) for name, cls in Op.registered_ops.items() if cls.__module__.startswith("core.ops."))


@pytest.mark.parametrize("name, cls", builtin_ops(), ids=lambda v: v if isinstance(v, str) else "")
def test_builtin_ops_write_through_the_schema(name, cls):
    op = cls(Graph(), {})
    if name in _NO_ATTRS:
        assert op.backend_attrs() == []
        return
    attrs = op.backend_attrs()
    assert isinstance(attrs, SchemaAttrs) and attrs.ir_type == op.attrs["type"]
    assert layer_schema(attrs.ir_type) is not None


def test_ir_attrs_refuses_names_the_schema_does_not_know():
    with pytest.raises(KeyError, match="no attribute"):
        ir_attrs("Convolution", kernel_size=lambda n: 3)
    with pytest.raises(KeyError, match="has no schema"):
        ir_attrs("MyLayer")


def _pooling_graph(stride):
    graph = Graph()
    inp = graph.add_op("data", type="Input", op="Parameter", backend_attrs=[])
    d0 = graph.add_data("data", shape=[1, 1, 4, 4])
    graph.connect(inp, d0)
    Op.registered_ops["Pooling"].update_node_stat(
        pool := graph.add_op("pool"), {"kernel": np.array([2, 2]), "stride": np.array(stride), "pad": np.zeros(2),
                                       "pool-method": "max"})
    graph.connect(d0, pool)
    graph.connect(pool, graph.add_data("pool", shape=[1, 1, 2, 2]))
    return graph


def test_emission_writes_schema_spellings_and_refuses_values_out_of_range():
    net = to_network(_pooling_graph([2, 2]), "n")
    assert net.layer_by_name("pool").data == {
        "kernel-x": "2", "kernel-y": "2", "pad-x": "0", "pad-y": "0", "stride": "1,1,2,2", "stride-x": "2",
        "stride-y": "2", "pool-method": "max", "exclude-pad": "false", "rounding_type": "ceil"}
    with pytest.raises(Error, match=r"Layer 'pool' \(Pooling\): .*'stride' is 0,2; it must be at least 1"):
        to_network(_pooling_graph([0, 2]), "n")
