"""What the benchmarks compare against, set up on demand and cached under
MO_CORE_HOME: the OpenVINO 2024.6 tools in a venv of their own (its `mo` still
converts Caffe; with TensorFlow 2.17 there, the newest it accepts, it converts
TensorFlow graphs), `ovc` of the OpenVINO runtime in this venv, caffemodels of
the Caffe sdist's deploy nets made by pycaffe, and the Keras application graphs
of tests/tf/keras_apps.py made by TensorFlow (in a subprocess)."""
import os
import subprocess
import sys

HOME = os.environ.get("MO_CORE_HOME", os.path.expanduser("~/.cache/mo-core"))
OPENVINO_VENV = os.path.join(HOME, "openvino-venv")
SDIST_MODELS = os.path.join(HOME, "caffe-src", "brocolli-caffe-9.0.2", "models")


def openvino_python(tensorflow: bool = False) -> str:
    py = os.path.join(OPENVINO_VENV, "bin", "python")
    extras = "caffe,tensorflow2" if tensorflow else "caffe"
    if not os.path.exists(py):
        subprocess.run([sys.executable, "-m", "venv", OPENVINO_VENV], check=True)
    has_tf = subprocess.run([py, "-c", "import importlib.util as u; raise SystemExit(u.find_spec('tensorflow') is "
                             "None)"]).returncode == 0
    if not os.path.exists(os.path.join(OPENVINO_VENV, "bin", "mo")) or (tensorflow and not has_tf):
        print("[ setup ] installing openvino-dev[{}]==2024.6.0 into {}".format(extras, OPENVINO_VENV), file=sys.stderr)
        subprocess.run([py, "-m", "pip", "install", "-q", "openvino-dev[{}]==2024.6.0".format(extras)], check=True)
    return py


def openvino_mo(tensorflow: bool = False) -> str:
    openvino_python(tensorflow)
    return os.path.join(OPENVINO_VENV, "bin", "mo")


def openvino_ovc() -> str:
    """`ovc` of the OpenVINO runtime installed next to this interpreter (requirements.txt)."""
    ovc = os.path.join(os.path.dirname(sys.executable), "ovc")
    if not os.path.exists(ovc):
        raise SystemExit("ovc is missing next to {}: run ./run test (or scripts/bootstrap.sh) first".format(
            sys.executable))
    return ovc


def keras_model(name: str, builder: str = "keras_apps") -> str:
    """The frozen .pb of a Keras model (built once, cached) of tests/tf/keras_apps.py or, with
    builder="modern_nets", of benchmarks/modern_nets.py."""
    from benchmarks.built_models import Models, built
    directory = os.path.dirname(os.path.abspath(__file__)) if builder == "modern_nets" else None
    return Models(built(builder, **({"directory": directory} if directory else {}))).path(name)


GENERATED = ("ssd_style",)  # nets written by benchmarks/<name>.py


def bvlc_model(name: str) -> tuple[str, str]:
    """(deploy.prototxt, caffemodel) for a sdist model (or a GENERATED one); weights
    made once by pycaffe."""
    out_dir = os.path.join(HOME, "bench-models")
    os.makedirs(out_dir, exist_ok=True)
    if name in GENERATED:
        import importlib
        text = importlib.import_module("benchmarks." + name).prototxt()
        proto = os.path.join(out_dir, name + ".prototxt")
        if not os.path.isfile(proto) or open(proto).read() != text:
            with open(proto + ".tmp", "w") as f:
                f.write(text)
            os.replace(proto + ".tmp", proto)
            if os.path.isfile(os.path.join(out_dir, name + ".caffemodel")):
                os.unlink(os.path.join(out_dir, name + ".caffemodel"))  # made for another text
    else:
        proto = os.path.join(SDIST_MODELS, name, "deploy.prototxt")
    if not os.path.isfile(proto):
        raise SystemExit("the Caffe sdist is missing at {}: run ./run test (or scripts/bootstrap.sh) first"
                         .format(SDIST_MODELS))
    weights = os.path.join(out_dir, name + ".caffemodel")
    if not os.path.isfile(weights):
        os.environ.setdefault("GLOG_minloglevel", "2")
        import numpy as np
        import caffe
        net = caffe.Net(proto, caffe.TEST)
        rng = np.random.default_rng(0)
        # He-scaled weights keep activations at a normal magnitude through every
        # layer: tiny weights drive them into float denormals, which slow some
        # engines (not others) by 10x and would make the comparison meaningless
        for blobs in net.params.values():
            w = blobs[0].data
            fan_in = int(np.prod(w.shape[1:])) or 1
            w[...] = rng.normal(0, np.sqrt(2.0 / fan_in), w.shape)
            for blob in blobs[1:]:
                blob.data[...] = rng.normal(0, 0.01, blob.data.shape)
        net.save(weights + ".tmp")
        os.replace(weights + ".tmp", weights)
    return proto, weights
