"""extgen's user errors: a clear [ ERROR ] (what, which key, what to do), exit 1, no
traceback and nothing written; and the generated variants that need more filling
in (a shape-changing op, untyped TensorFlow attributes, a Pythonic Caffe layer)
still lint and import, with each place to write marked."""
import json
import os

import pytest

from cli.extgen_render import fill_ins, render
from cli.extgen_spec import parse_spec
from tests.extgen.conftest import example_config
from tests.extgen.extgen_helpers import import_in_subprocess, lint, python_files, tree, write_config
from tests.support import run_cli


def fails(tmp_path, config, *needles):
    out = tmp_path / "out"
    if isinstance(config, dict):
        config = dict(config, output_dir=str(out)) if "output_dir" in config else config
        path = write_config(tmp_path / "c.json", config)
    else:
        path = str(tmp_path / "c.json")
        (tmp_path / "c.json").write_text(config)
    code, stdout, stderr = run_cli("extgen", path)
    assert code == 1, stdout + stderr
    assert "[ ERROR ]" in stderr and "Traceback" not in stderr
    for needle in needles:
        assert needle in stderr, (needle, stderr)
    assert not out.exists()


@pytest.mark.parametrize("change, needles", [
    (dict(mo_op=False, mo_caffe_ext=False, ie_cpu_ext=False, ie_gpu_ext=False), ["turns no component on"]),
    (dict(op={"name": "Hard Sigmoid", "changes_shape": False}), ["'op.name' must be a name"]),
    (dict(op={"name": "HardSigmoid"}), ["'op.changes_shape' is missing"]),
    (dict(op={"name": "H", "changes_shape": False, "attrs": [["alpha", "double"]]}),
     ["'op.attrs[0]' has type 'double'"]),
    (dict(op={"name": "H", "changes_shape": False, "attrs": [["alpha", "float", "x"]]}),
     ["'x' is not a float value"]),
    (dict(caffe={"layer": "H", "params": [["a", "a", "int"]]}), ["'caffe.param_field' is needed"]),
    (dict(caffe={"layer": "H", "pythonic": True}), ["'caffe.module' is missing"]),
    (dict(cpu={"name": "H", "params": [["a", "int"], ["a", "float"]]}), ["'cpu.params' names a twice"]),
    (dict(gpu={"name": "H", "params": [["a", "string"]]}), ["'gpu.params[0]' has type 'string'"]),
    (dict(gpu={"name": "H", "inputs": 0}), ["'gpu.inputs' must be 1 to 8"]),
    (dict(one_file=True, mo_op=False), ["'one_file' puts an extractor, its op and the CPU kernel in one file"]),
    (dict(colour="red"), ["'colour' is not a key extgen knows"]),
    # names the generated Python could not hold, defaults it could not write
    (dict(op={"name": "H", "changes_shape": False, "attrs": [["lambda", "float", "0.2"]]}),
     ["'op.attrs[0]' 'lambda' is a Python keyword"]),
    (dict(cpu={"name": "H", "params": [["None", "int"]]}), ["'None' is a Python keyword"]),
    (dict(op={"name": "H", "changes_shape": False, "attrs": [["type", "string"]]}),
     ["names the attribute 'type', which every op has already"]),
    (dict(op={"name": "H", "changes_shape": False, "attrs": [["alpha", "float", "nan"]]}),
     ["a float default must be a finite number, got 'nan'"]),
    (dict(op={"name": "H", "changes_shape": False, "attrs": [["alpha", "listfloat", "1,1e999"]]}),
     ["must hold finite numbers"]),
])
def test_bad_configurations(tmp_path, change, needles):
    fails(tmp_path, example_config(output_dir="x", **change), *needles)


def test_unreadable_configurations(tmp_path):
    fails(tmp_path, "{oops", "is not valid JSON")
    fails(tmp_path, "[1, 2]", "must be a JSON object")
    code, _, err = run_cli("extgen", str(tmp_path / "none.json"))
    assert code == 1 and "does not exist" in err and "mo-core extgen new" in err


def test_usage_errors(tmp_path):
    code, _, err = run_cli("extgen", "new", str(tmp_path / "o"))
    assert code == 1 and "name at least one component" in err
    config = write_config(tmp_path / "c.json", example_config(output_dir=str(tmp_path / "o")))
    code, _, err = run_cli("extgen", config, "--mo-op")
    assert code == 1 and "everything comes from the file" in err
    code, _, err = run_cli("extgen", "new", "mo-op", "a", "b")
    assert code == 1 and "'b' is not a component" in err


def test_existing_files_are_never_overwritten(tmp_path):
    out = tmp_path / "out"
    config = write_config(tmp_path / "c.json", example_config(output_dir=str(out)))
    assert run_cli("extgen", config)[0] == 0
    kernel = out / "user_ie_extensions" / "cpu" / "ext_hardsigmoid.py"
    kernel.write_text("# my work\n")
    before = tree(str(out))
    code, _, err = run_cli("extgen", config)
    assert code == 1 and "exist(s) already" in err and "nothing was written" in err
    assert tree(str(out)) == before


def test_variants_with_more_to_fill_in_lint_import_and_mark_every_place(tmp_path):
    config = example_config(
        output_dir=str(tmp_path / "out"), mo_tf_ext=True,
        op={"name": "Resize2x", "changes_shape": True, "attrs": [["factor", "int", "2"], ["modes", "listint"]]},
        caffe={"pythonic": True, "module": "rpn.resize_layer", "layer": "ResizeLayer", "all_params": False,
               "params": [["factor", "factor", "int"], ["modes", "modes", "listint"]], "op": "Resize2x"},
        tf={"layer": "Resize", "op": "Resize2x", "all_params": False,
            "params": [["factor", "factor", "i"], ["data_format", "axes", "spatial"], ["padding", "pad", "padding"],
                       ["table", "table", ""]]},
        cpu={"name": "Resize2x", "params": [["factor", "int"], ["modes", "listint"]]},
        gpu={"name": "Resize2x", "params": [["factor", "int"], ["modes", "listint"]], "inputs": 2})
    spec = parse_spec(config, "test")
    files = render(spec)
    where = {(path, what.split(":")[0]) for path, _, what in fill_ins(files)}
    assert where == {
        ("user_mo_extensions/ops/resize2x.py", "the output shape of Resize2x"),
        ("user_mo_extensions/front/tf/resize_ext.py", "attribute 'table' from 'table'"),
        ("user_ie_extensions/cpu/ext_resize2x.py", "the output shapes of Resize2x"),
        ("user_ie_extensions/cpu/ext_resize2x.py", "the computation of Resize2x"),
        ("user_ie_extensions/gpu/resize2x.cl", "compute output[out_id] of Resize2x")}
    code, _, err = run_cli("extgen", write_config(tmp_path / "c.json", config))
    assert code == 0, err
    files_py = python_files(str(tmp_path / "out"))
    assert lint(files_py) == []
    proc = import_in_subprocess(files_py)
    assert proc.returncode == 0, proc.stderr
    caffe = open(tmp_path / "out" / "user_mo_extensions" / "front" / "caffe" / "resizelayer_ext.py").read()
    assert "op = 'rpn.resize_layer.ResizeLayer'" in caffe and "values['factor']" in caffe
    xml = open(tmp_path / "out" / "user_ie_extensions" / "gpu" / "resize2x.xml").read()
    assert '<Tensor arg-index="1" type="input" port-index="1" format="BFYX"/>' in xml
    assert '<Define name="MODES" type="int[]" param="modes"/>' in xml
    assert json.loads(json.dumps(config))  # the configuration is plain JSON
    assert os.path.isfile(tmp_path / "out" / "user_mo_extensions" / "front" / "tf" / "resize_ext.py")
