"""The CPU kernels read their attributes through ir/schema."""
import numpy as np

from device_daemons.cpu import KERNELS, ExecutionPlan
from ir.schema import layer_schema
from tests.cpu.cpu_helpers import single_layer_ir


def test_every_builtin_kernel_type_has_a_schema():
    assert [t for t in KERNELS if layer_schema(t) is None] == []


def test_kernels_read_the_later_ir_spellings_and_schema_defaults(tmp_path):
    net = single_layer_ir(tmp_path, "Convolution", {"kernel": "3,3", "output": "2", "strides": "2,2"},
                          [(1, 1, 5, 5)], [(1, 2, 2, 2)], blobs={"weights": np.ones(18, np.float32)})
    kernel = KERNELS["Convolution"](net.layer_by_name("layer"))
    assert kernel.attrs == {"dilation": (1, 1), "group": 1, "kernel": (3, 3), "output": 2, "pad": (0, 0),
                            "pad_end": (0, 0), "stride": (2, 2)}
    out = ExecutionPlan(net).infer({"in0": np.ones((1, 1, 5, 5), np.float32)})
    # a 3x3 all-ones kernel over ones, stride 2, no padding: every output is 9
    assert np.array_equal(out["layer"], np.full((1, 2, 2, 2), 9, np.float32))
