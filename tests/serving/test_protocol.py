"""The KServe v2 / Triton protocol of `mo-core serve`, driven by NVIDIA's unmodified
tritonclient (HTTP and gRPC) and by plain httpx JSON, on a real server process:
metadata, inference in every wire form equal to the CPU daemon called directly and
to pycaffe (1e-4), the repository extension, statistics and metrics, the access log,
and bad requests answered with 4xx and the protocol's {"error": ...}."""
from __future__ import annotations

import json
import re
import shutil
import socket
import threading

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support import caffe_outputs

from .conftest import reference, write_ir_of

TOL = 1e-4


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def rel_err(ours, ref) -> float:
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    return float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-12))


def infer_every_way(server, model: str, inputs: dict, output: str) -> dict:
    """{wire form: output array} for one request sent every way a client can."""
    http = httpclient.InferenceServerClient(server.http)
    grpc = grpcclient.InferenceServerClient(server.grpc)
    out = {}
    for binary in (False, True):
        tensors = []
        for name, value in inputs.items():
            t = httpclient.InferInput(name, list(value.shape), "FP32")
            t.set_data_from_numpy(value, binary_data=binary)
            tensors.append(t)
        result = http.infer(model, tensors, outputs=[httpclient.InferRequestedOutput(output, binary_data=binary)])
        out["rest-binary" if binary else "rest-json"] = result.as_numpy(output)
    tensors = []
    for name, value in inputs.items():
        t = grpcclient.InferInput(name, list(value.shape), "FP32")
        t.set_data_from_numpy(value)
        tensors.append(t)
    out["grpc-raw"] = grpc.infer(model, tensors).as_numpy(output)
    body = {"inputs": [{"name": n, "datatype": "FP32", "shape": list(v.shape), "data": v.ravel().tolist()}
                       for n, v in inputs.items()]}
    reply = httpx.post(f"{server.url}/v2/models/{model}/infer", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    doc = reply.json()
    assert doc["model_name"] == model and doc["model_version"] == "1"
    (tensor,) = [o for o in doc["outputs"] if o["name"] == output]
    assert tensor["datatype"] == "FP32"
    out["httpx-json"] = np.array(tensor["data"], np.float32).reshape(tensor["shape"])
    return out


def test_not_ready_until_every_model_is_loaded(server):
    """The fixture polled /v2/health/ready from the moment the ports opened, while the
    models loaded (GoogLeNet, a Caffe net converted first): 400 until all were READY."""
    # (the access-log line of the poll that saw 200 is written after its answer: wait for it)
    server.wait_for(r'"GET /v2/health/ready" 200 ', timeout=30)
    lines = server.lines
    polls = [(i, "200" if '" 200 ' in line else "400") for i, line in enumerate(lines)
             if '"GET /v2/health/ready"' in line]
    ready = next(i for i, line in enumerate(lines) if "ready: 4 models loaded" in line)
    last_network = max(i for i, line in enumerate(lines[:ready]) if ": loaded on CPU" in line)
    first_ok = next(i for i, status in polls if status == "200")
    assert polls[0][1] == "400" and first_ok > last_network


def test_server_and_model_metadata(server):
    http = httpclient.InferenceServerClient(server.http)
    grpc = grpcclient.InferenceServerClient(server.grpc)
    assert http.is_server_live() and http.is_server_ready()
    assert grpc.is_server_live() and grpc.is_server_ready()
    meta = http.get_server_metadata()
    assert meta["name"] == "mo-core"
    assert {"binary_tensor_data", "model_repository", "statistics"} <= set(meta["extensions"])
    assert grpc.get_server_metadata().name == "mo-core"

    g = http.get_model_metadata("googlenet")
    assert g["versions"] == ["1"]
    assert g["inputs"] == [{"name": "data", "datatype": "FP32", "shape": [1, 3, 224, 224]}]
    assert g["outputs"] == [{"name": "prob", "datatype": "FP32", "shape": [1, 1000]}]
    gg = grpc.get_model_metadata("googlenet", as_json=True)
    assert gg["inputs"][0]["name"] == "data" and [int(d) for d in gg["inputs"][0]["shape"]] == [1, 3, 224, 224]
    two = http.get_model_metadata("two_input")
    assert [t["name"] for t in two["inputs"]] == ["left", "right"]
    # the batching net: config.json renames its input, its batch dimension is -1, v2 is the newest
    b = http.get_model_metadata("tiny_batched")
    assert b["versions"] == ["2"]
    assert b["inputs"] == [{"name": "image", "datatype": "FP32", "shape": [-1, 3, 16, 16]}]
    config = http.get_model_config("tiny_batched")
    assert config["max_batch_size"] == 8
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 20000
    assert http.is_model_ready("googlenet") and grpc.is_model_ready("two_input")
    assert http.is_model_ready("tiny_batched", "2") and not http.is_model_ready("tiny_batched", "1")


def test_googlenet_every_way_equals_the_daemon_and_pycaffe(server, serving_models, direct_ie):
    models, repo = serving_models
    proto, weights = models["googlenet"]
    x = rand((1, 3, 224, 224), 1)
    daemon = reference(direct_ie, f"{repo}/googlenet/1/model.xml", {"data": x})["prob"]
    caffe = caffe_outputs(proto, weights, {"data": x}).blobs["prob"].data
    for form, ours in infer_every_way(server, "googlenet", {"data": x}, "prob").items():
        assert rel_err(ours, daemon) <= TOL, form
        assert rel_err(ours, caffe) <= TOL, form


def test_two_input_net_every_way_equals_the_daemon_and_pycaffe(server, serving_models, direct_ie, tmp_path):
    models, _ = serving_models
    proto, weights = models["two_input"]
    xml = write_ir_of(proto, weights, str(tmp_path))
    inputs = {"left": rand((1, 3, 12, 12), 2), "right": rand((1, 3, 12, 12), 3)}
    daemon = reference(direct_ie, xml, inputs)["prob"]
    caffe = caffe_outputs(proto, weights, inputs).blobs["prob"].data
    for form, ours in infer_every_way(server, "two_input", inputs, "prob").items():
        assert rel_err(ours, daemon) <= TOL, form
        assert rel_err(ours, caffe) <= TOL, form
    # the Caffe model was converted when the server loaded it, and the log said so
    assert any("model two_input version 1: converting the caffe model" in line for line in server.lines)


def test_declared_datatypes_uint8_in_fp16_out(server, serving_models, direct_ie):
    _, repo = serving_models
    x = np.random.default_rng(8).integers(0, 256, (1, 3, 16, 16), dtype=np.uint8)
    want = reference(direct_ie, f"{repo}/tiny_u8/1/model.xml", {"data": x.astype(np.float32)})["prob"]
    http = httpclient.InferenceServerClient(server.http)
    meta = http.get_model_metadata("tiny_u8")
    assert meta["inputs"][0]["datatype"] == "UINT8" and meta["outputs"][0]["datatype"] == "FP16"
    for binary in (False, True):
        t = httpclient.InferInput("image", [1, 3, 16, 16], "UINT8")
        t.set_data_from_numpy(x, binary_data=binary)
        out = http.infer("tiny_u8", [t], outputs=[httpclient.InferRequestedOutput("scores", binary_data=binary)])
        assert out.as_numpy("scores").dtype == np.float16
        np.testing.assert_allclose(out.as_numpy("scores"), want, rtol=1e-3, atol=1e-4)
    g = grpcclient.InferInput("image", [1, 3, 16, 16], "UINT8")
    g.set_data_from_numpy(x)
    out = grpcclient.InferenceServerClient(server.grpc).infer("tiny_u8", [g]).as_numpy("scores")
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-4)
    body = {"inputs": [{"name": "image", "datatype": "UINT8", "shape": [1, 3, 16, 16], "data": [300] * 768}]}
    reply = httpx.post(f"{server.url}/v2/models/tiny_u8/infer", json=body)
    assert reply.status_code == 400 and "UINT8 values" in reply.json()["error"]  # 300 does not fit: no wrap
    body["inputs"][0].update(datatype="FP32", data=[1.0] * 768)
    reply = httpx.post(f"{server.url}/v2/models/tiny_u8/infer", json=body)
    assert reply.status_code == 400 and "is UINT8, the request gave FP32" in reply.json()["error"]


def test_repository_index_load_and_unload(server, serving_models, direct_ie):
    _, repo = serving_models
    http = httpclient.InferenceServerClient(server.http)
    grpc = grpcclient.InferenceServerClient(server.grpc)
    index = {(m["name"], m.get("version")): m.get("state") for m in http.get_model_repository_index()}
    assert index[("googlenet", "1")] == "READY"
    assert index[("tiny", None)] is None  # in the repository, not loaded
    assert not http.is_model_ready("tiny")

    http.load_model("tiny")
    assert http.is_model_ready("tiny")
    x = rand((1, 3, 16, 16), 4)
    t = grpcclient.InferInput("data", [1, 3, 16, 16], "FP32")
    t.set_data_from_numpy(x)
    ours = grpc.infer("tiny", [t]).as_numpy("prob")
    assert rel_err(ours, reference(direct_ie, f"{repo}/tiny/1/model.xml", {"data": x})["prob"]) <= TOL
    ready = {m.name for m in grpc.get_model_repository_index().models if m.state == "READY"}
    assert {"googlenet", "two_input", "tiny_batched", "tiny_u8", "tiny"} <= ready

    grpc.unload_model("tiny")
    assert not http.is_model_ready("tiny")
    with pytest.raises(InferenceServerException, match="not ready"):
        grpc.infer("tiny", [t])
    assert http.is_server_ready()  # an explicit unload is not a model missing
    with pytest.raises(InferenceServerException, match="no model 'nosuch'"):
        http.load_model("nosuch")
    # a model whose config.json is wrong fails to load with the file and the key named;
    # the index says why, the other models serve on
    with pytest.raises(InferenceServerException, match=r"config.json: unknown key 'dynamic_batchin'"):
        grpc.load_model("broken")
    (entry,) = [m for m in http.get_model_repository_index() if m["name"] == "broken"]
    assert entry["state"] == "UNAVAILABLE" and "dynamic_batchin" in entry["reason"]
    assert http.is_model_ready("googlenet")


def test_statistics_and_metrics(server):
    http = httpclient.InferenceServerClient(server.http)
    grpc = grpcclient.InferenceServerClient(server.grpc)

    def count():
        (entry,) = http.get_inference_statistics("two_input")["model_stats"]
        return entry["inference_count"], entry["inference_stats"]["success"]["count"]

    before = count()
    inputs = [httpclient.InferInput(n, [1, 3, 12, 12], "FP32") for n in ("left", "right")]
    for t in inputs:
        t.set_data_from_numpy(rand((1, 3, 12, 12), 5))
    for _ in range(3):
        http.infer("two_input", inputs)
    assert count() == (before[0] + 3, before[1] + 3)
    g = grpc.get_inference_statistics("two_input").model_stats[0]
    assert g.name == "two_input" and g.version == "1" and g.inference_count == before[0] + 3
    assert g.inference_stats.compute_infer.ns > 0
    with pytest.raises(InferenceServerException):
        http.get_inference_statistics("nosuch")
    # a failure on /versions/01 is version 1's (a label per spelling made series without bound)
    bad = httpx.post(server.url + "/v2/models/two_input/versions/01/infer",
                     json={"inputs": [{"name": "nosuch", "datatype": "FP32", "shape": [1], "data": [1.0]}]})
    assert bad.status_code == 400, bad.text
    (entry,) = http.get_inference_statistics("two_input", "01")["model_stats"]
    assert entry["version"] == "1" and entry["inference_stats"]["fail"]["count"] >= 1
    text = httpx.get(server.url + "/metrics").text
    assert 'version="01"' not in text
    success = re.search(r'^nv_inference_request_success\{model="two_input",version="1"\} (\S+)$', text, re.M)
    assert success and float(success.group(1)) == before[1] + 3
    for name in ("nv_inference_count", "nv_inference_exec_count", "nv_inference_request_duration_us",
                 "nv_inference_queue_duration_us", "nv_inference_compute_infer_duration_us"):
        assert re.search(rf'^{name}\{{model="two_input",version="1"\}} ', text, re.M), name


def test_one_access_log_line_per_request(server):
    start = len(server.lines)
    httpx.get(server.url + "/v2/models/two_input/versions/1")
    grpcclient.InferenceServerClient(server.grpc).get_model_metadata("googlenet")
    server.wait_for(r'"GET /v2/models/two_input/versions/1" 200 \d+B [\d.]+ms', 10, start)
    server.wait_for(r'"/inference.GRPCInferenceService/ModelMetadata googlenet" OK 0B [\d.]+ms', 10, start)


def _infer_body(**tensor):
    t = {"name": "data", "datatype": "FP32", "shape": [1, 3, 224, 224], "data": [0.0] * (3 * 224 * 224)}
    t.update(tensor)
    return {"inputs": [t]}


def _tiny_body(**tensor):
    t = {"name": "image", "datatype": "FP32", "shape": [1, 3, 16, 16], "data": [0.0] * 768}
    t.update(tensor)
    return {"inputs": [t]}


_BINARY_HEADER = (b'{"inputs": [{"name": "data", "datatype": "FP32", "shape": [1, 3, 224, 224], '
                  b'"parameters": {"binary_data_size": 602112}}]}')
BAD_REQUESTS = [  # (path, body or bytes, headers, status, words the error must say)
    ("googlenet/infer", b"{not json", {}, 400, "not valid JSON"),
    ("googlenet/infer", {}, {}, 400, "'inputs'"),
    ("googlenet/infer", _infer_body(datatype="FP64"), {}, 400, "is FP32"),
    ("googlenet/infer", _infer_body(datatype="BYTES"), {}, 400, "not supported"),
    ("googlenet/infer", _infer_body(shape=[1, 3, 224]), {}, 400, "holds 150528 values"),
    ("googlenet/infer", _infer_body(shape=[2, 3, 112, 224]), {}, 400, "must have shape [1, 3, 224, 224]"),
    ("googlenet/infer", _infer_body(name="image"), {}, 400, "unknown input 'image'"),
    ("googlenet/infer", _infer_body(data="abc"), {}, 400, "FP32 values"),
    ("googlenet/infer", _infer_body(shape=[-1]), {}, 400, "non-negative integers"),
    ("googlenet/infer", b'{"inputs": []}', {"Inference-Header-Content-Length": "99999"}, 400,
     "Inference-Header-Content-Length"),
    ("googlenet/infer", _BINARY_HEADER + b"1234", {"Inference-Header-Content-Length": str(len(_BINARY_HEADER))},
     400, "binary_data_size"),
    ("googlenet/infer", {"inputs": [{"name": "data", "datatype": "FP32", "shape": [1], "data": [1.0]}],
                         "outputs": [{"name": "nosuch"}]}, {}, 400, "no output 'nosuch'"),
    ("nosuch/infer", _infer_body(), {}, 404, "unknown model 'nosuch'"),
    ("googlenet/versions/7/infer", _infer_body(), {}, 404, "no version '7'"),
    ("googlenet/infer", b"x" * (5 << 20), {}, 413, "larger than the server's limit"),
    ("googlenet/infer", _infer_body(), {"Content-Encoding": "gzip"}, 415, "not supported"),
    # JSON data of another type than the datatype's: refused, not converted
    ("tiny_batched/infer", _tiny_body(data=["1.5"] * 768), {}, 400, "list of numbers"),
    ("tiny_batched/infer", _tiny_body(data=[True] * 768), {}, 400, "list of numbers"),
    ("tiny_batched/infer", _tiny_body(data=[1e300] * 768), {}, 400, "in the datatype's range"),
    ("tiny_batched/infer", {**_tiny_body(), "outputs": [{"name": "prob", "parameters": {"binary_data": "false"}}]},
     {}, 400, "'binary_data' must be true or false"),
]


@pytest.mark.parametrize("path, body, headers, status, words", BAD_REQUESTS,
                         ids=[f"{i}-{b[3]}" for i, b in enumerate(BAD_REQUESTS)])
def test_bad_requests_get_4xx_and_the_protocols_error(server, path, body, headers, status, words):
    content = body if isinstance(body, bytes) else httpx.Request("POST", "/", json=body).read()
    reply = httpx.post(f"{server.url}/v2/models/{path}", content=content, headers=headers, timeout=60)
    assert reply.status_code == status, reply.text
    assert words in reply.json()["error"], reply.json()


def test_the_infer_route_other_methods_chunked_bodies_and_clients_that_go_away(server):
    """The infer endpoint (rest.InferEndpoint, in front of FastAPI): another method gets
    405 naming POST; a chunked body (no Content-Length for the guard to check) is cut at
    the limit while it arrives; a client gone before its body was all there gets no
    answer and the server goes on."""
    reply = httpx.get(f"{server.url}/v2/models/googlenet/infer", timeout=60)
    assert reply.status_code == 405 and reply.headers["allow"] == "POST", reply.text
    assert "takes POST" in reply.json()["error"]

    def chunks():
        for _ in range(6):
            yield b"x" * (1 << 20)
    reply = httpx.post(f"{server.url}/v2/models/googlenet/infer", content=chunks(), timeout=60)
    assert reply.status_code == 413 and "larger than the server's limit" in reply.json()["error"], reply.text
    host, port = server.url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"POST /v2/models/googlenet/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 602112\r\n\r\n"
                     + b"\0" * 1000)
    start = len(server.lines)
    body = {"inputs": [{"name": "data", "datatype": "FP32", "shape": [1, 3, 224, 224],
                        "data": rand((1, 3, 224, 224), 3).ravel().tolist()}]}
    reply = httpx.post(f"{server.url}/v2/models/googlenet/infer", json=body, timeout=60)
    assert reply.status_code == 200 and reply.json()["outputs"][0]["shape"] == [1, 1000]
    server.wait_for(r'"POST /v2/models/googlenet/infer" 200 ', 10, start)


def test_bad_grpc_requests_and_the_server_keeps_serving(server):
    grpc = grpcclient.InferenceServerClient(server.grpc)
    t = grpcclient.InferInput("data", [1, 3, 224, 223], "FP32")
    t.set_data_from_numpy(np.zeros((1, 3, 224, 223), np.float32))
    with pytest.raises(InferenceServerException) as exc:
        grpc.infer("googlenet", [t])
    assert exc.value.status() == "StatusCode.INVALID_ARGUMENT" and "must have shape" in exc.value.message()
    with pytest.raises(InferenceServerException) as exc:
        grpc.infer("nosuch", [t])
    assert exc.value.status() == "StatusCode.NOT_FOUND"
    t = grpcclient.InferInput("data", [1, 3, 224, 224], "FP16")
    t.set_data_from_numpy(np.zeros((1, 3, 224, 224), np.float16))
    with pytest.raises(InferenceServerException, match="is FP32, the request gave FP16"):
        grpc.infer("googlenet", [t])
    # after all of that (and the REST ones), every model still answers
    http = httpclient.InferenceServerClient(server.http)
    assert http.is_server_ready()
    x = rand((1, 3, 224, 224), 9)
    t = grpcclient.InferInput("data", [1, 3, 224, 224], "FP32")
    t.set_data_from_numpy(x)
    assert grpc.infer("googlenet", [t]).as_numpy("prob").shape == (1, 1000)


def test_every_models_statistics_the_config_over_grpc_and_unknown_routes(server):
    http = httpclient.InferenceServerClient(server.http)
    grpc = grpcclient.InferenceServerClient(server.grpc)
    every = {e["name"] for e in http.get_inference_statistics()["model_stats"]}  # GET /v2/models/stats
    assert {"googlenet", "two_input", "tiny_batched", "tiny_u8"} <= every
    # Triton's ModelConfig over gRPC: the REST configuration, in its model_config.proto fields
    rest = http.get_model_config("tiny_batched")
    g = grpc.get_model_config("tiny_batched", as_json=True)["config"]
    assert (g["name"], g["platform"], g["max_batch_size"]) == (rest["name"], rest["platform"], 8)
    for key in ("input", "output"):
        assert [(t["name"], t["data_type"], [int(d) for d in t["dims"]]) for t in g[key]] == \
            [(t["name"], t["data_type"], t["dims"]) for t in rest[key]]
    assert int(g["dynamic_batching"]["max_queue_delay_microseconds"]) == 20000
    assert g["instance_group"][0]["kind"] == "KIND_CPU" and g["parameters"]["device"]["string_value"] == "CPU"
    # a route the protocol does not have: the protocol's error body, which tritonclient reads
    reply = httpx.get(f"{server.url}/v2/nosuch", timeout=30)
    assert reply.status_code == 404 and "no such route" in reply.json()["error"]
    with pytest.raises(InferenceServerException, match="no such route"):
        http.get_trace_settings()


def test_non_finite_values_travel_as_triton_writes_them(server):
    """NaN and (-)Infinity in JSON as the tokens Triton reads and writes (and Python's
    json, tritonclient's parser, reads): an input with +inf gives NaN outputs, the same
    in JSON as in the binary form."""
    x = rand((1, 3, 16, 16), 11)
    x[0, 0, 3, 3] = np.inf
    body = json.dumps(_tiny_body(data=x.ravel().tolist()))  # (Python's json writes Infinity)
    assert "Infinity" in body
    reply = httpx.post(f"{server.url}/v2/models/tiny_batched/infer", content=body, timeout=60)
    assert reply.status_code == 200, reply.text
    assert "NaN" in reply.text and "null" not in reply.text
    (tensor,) = reply.json()["outputs"]
    as_json = np.array(tensor["data"], np.float32).reshape(tensor["shape"])
    http = httpclient.InferenceServerClient(server.http)
    t = httpclient.InferInput("image", [1, 3, 16, 16], "FP32")
    t.set_data_from_numpy(x)
    binary = http.infer("tiny_batched", [t]).as_numpy("prob")
    assert not np.isfinite(binary).all()
    np.testing.assert_array_equal(as_json, binary)
    json_out = http.infer("tiny_batched", [t], outputs=[httpclient.InferRequestedOutput("prob", binary_data=False)])
    np.testing.assert_array_equal(json_out.as_numpy("prob"), binary)


def test_integer_inputs_exactly_integer_outputs_saturated(server):
    """A pass-through net with an INT32 input and a UINT8 output: values come back
    rounded and saturated at 0 and 255, never wrapped; an INT32 value FP32 cannot hold
    exactly is refused."""
    http = httpclient.InferenceServerClient(server.http)
    http.load_model("same_int")
    try:
        x = np.array([[[[-5, 0, 3], [255, 300, 16777216]]]], np.int32)
        t = httpclient.InferInput("x", [1, 1, 2, 3], "INT32")
        t.set_data_from_numpy(x)
        y = http.infer("same_int", [t]).as_numpy("y")
        assert y.dtype == np.uint8 and y.tolist() == [[[[0, 0, 3], [255, 255, 255]]]]
        x[0, 0, 0, 0] = 16777217
        t.set_data_from_numpy(x)
        with pytest.raises(InferenceServerException, match="cannot hold exactly"):
            http.infer("same_int", [t])
    finally:
        http.unload_model("same_int")


def test_versions_a_damaged_ir_and_a_reload_that_fails(server, serving_models):
    _, repo = serving_models
    http = httpclient.InferenceServerClient(server.http)
    http.load_model("tiny_all")
    config = f"{repo}/tiny_all/config.json"
    with open(config) as f:
        original = f.read()
    try:
        # every version that serves is listed (Triton: the versions a request may name)
        assert http.get_model_metadata("tiny_all")["versions"] == ["1", "2"]
        assert http.get_model_metadata("tiny_all", "1")["versions"] == ["1"]
        # a damaged IR fails to load alone, with the file named; the server stays ready
        with pytest.raises(InferenceServerException, match="not well-formed XML"):
            http.load_model("damaged")
        (entry,) = [m for m in http.get_model_repository_index() if m["name"] == "damaged"]
        assert entry["state"] == "UNAVAILABLE" and "model.xml" in entry["reason"]
        # a reload that fails (a bad device, versions that are not there) leaves what serves serving
        x = rand((1, 3, 16, 16), 12)
        t = httpclient.InferInput("data", [1, 3, 16, 16], "FP32")
        t.set_data_from_numpy(x)
        before = http.infer("tiny_all", [t]).as_numpy("prob")
        for bad, words in (({"versions": "all", "device": "NOSUCH"}, "NOSUCH"), ({"versions": [7]}, "has only")):
            with open(config, "w") as f:
                json.dump(bad, f)
            with pytest.raises(InferenceServerException, match=words):
                http.load_model("tiny_all")
            assert http.is_server_ready() and http.is_model_ready("tiny_all", "1")
            states = {m.get("version"): m.get("state") for m in http.get_model_repository_index()
                      if m["name"] == "tiny_all"}
            assert states == {"1": "READY", "2": "READY"}, states
            np.testing.assert_array_equal(http.infer("tiny_all", [t]).as_numpy("prob"), before)
    finally:
        with open(config, "w") as f:
            f.write(original)
        http.unload_model("tiny_all")


def test_an_unload_during_a_load_is_done_after_it(server, serving_models):
    """Loads and unloads of a model run in the order they came: an unload sent while a
    Caffe model converts on load waits for the load, then unloads (the last one wins)."""
    _, repo = serving_models
    shutil.copytree(f"{repo}/two_input", f"{repo}/two_input_race")
    try:
        start = len(server.lines)
        loaded = {}
        loader = threading.Thread(target=lambda: loaded.update(
            status=httpx.post(f"{server.url}/v2/repository/models/two_input_race/load", timeout=300).status_code))
        loader.start()
        server.wait_for(r"model two_input_race version 1: converting", 60, start)
        unload = httpx.post(f"{server.url}/v2/repository/models/two_input_race/unload", timeout=300)
        loader.join(300)
        assert loaded["status"] == 200 and unload.status_code == 200, unload.text
        assert not httpclient.InferenceServerClient(server.http).is_model_ready("two_input_race")
    finally:
        shutil.rmtree(f"{repo}/two_input_race")
