"""GPU inference speed: mo-core's GPU plan (in-process) and GPU daemon next to
PyTorch eager on the same device, for GoogLeNet, AlexNet, the SSD-style net and
the Keras ResNet50 IR at batch 1 and 8, FP32 and FP16.

    python benchmarks/infer_gpu.py [--models bvlc_googlenet,bvlc_alexnet,ssd_style,keras_resnet50]
                                   [--batches 1,8] [--precisions FP32,FP16] [--iterations 30]
                                   [--engines plan,daemon,torch] [--ir-dir DIR] [--json FILE]
                                   [--include-json FILE ...]
    python benchmarks/infer_gpu.py --make-weights DIR    # .bin files for the .xml files of DIR

What runs (each engine of each model in a fresh process, so that a slow or hung
engine costs only its --timeout, and in a session of its own, as the daemons are):
- plan: GpuPlan in-process on the OpenCL device the plugin picks (a GPU, else
  PoCL's CPU device), its kernels chosen as MO_CORE_GPU_TUNE says (default: the
  per-device search on a GPU, tuning time reported apart from the build), checked
  against the CPU plan: max |diff| / max |ref| over the inputs of the SoftMax /
  DetectionOutput heads (logits, SSD's box and class tensors: a saturated SoftMax
  or detections reordered among near-equal scores would hide or exaggerate a
  difference), and over the outputs; top-1;
- daemon: the GPU daemon through IECore (a private runtime directory, the
  daemon started for the run and stopped after), its compute time as it reports it;
- torch: PyTorch eager on the closest torchvision model (googlenet, alexnet,
  resnet50; the SSD-style net has none) made the IR's network (torch_twin):
  googlenet's inception blocks get the 5x5 convolutions of GoogLeNet (torchvision
  keeps a 3x3 there) and Caffe's two LRNs; alexnet gets Caffe's features (96/256/
  384/384/256 channels, groups of 2 on conv2, 4 and 5, LRN after conv1 and conv2,
  no padding on conv1) and no average pooling; resnet50 is made v1 as Keras' (the
  stride 2 of a stage on its first 1x1 convolution, not on the 3x3); every
  BatchNorm folded into its convolution in eval mode (as the IR has them: one
  convolution kernel each), a SoftMax appended; fed the IR's input size (227 for
  AlexNet). CUDA, FP32 with TF32 off and FP16, cudnn.benchmark on, where torch
  and a CUDA device are present. The differences left: PyTorch's own random
  weights (the same work, not the same numbers); eager's Python module calls
  (dropout and the folded BatchNorms' identities launch no kernel); torch's max
  pooling pads with -inf where Keras pads zeros (the same values after a ReLU).
  The table prints the multiply-adds per image of both sides (ours: the IR's
  convolutions and fully connected layers; torch's: its modules' on a forward),
  and a goal against eager is "not comparable" where they differ by more than
  WORK_TOLERANCE.
Weights: the IRs converted from the benchmarks' caffemodels / Keras graph
(benchmarks/references.py), or with --ir-dir the .xml files there (named
<model>_<FP32|FP16>.xml) with weights --make-weights generated (He-scaled
normal, seeded by layer and blob name: the FP16 file holds the FP32 values
rounded). Input: standard normal, seed 0.
Latency: median (min) of --iterations after 3 warm-up runs; batch 8 also as
frames/s. --include-json adds rows measured elsewhere (e.g. PoCL on another
machine), marked with their device. The load average is printed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.timing import measure_ms  # noqa: E402 (the median, the min, in ms)

MODELS = ("bvlc_googlenet", "bvlc_alexnet", "ssd_style", "keras_resnet50")
TORCH_TWINS = {"bvlc_googlenet": "googlenet", "bvlc_alexnet": "alexnet", "keras_resnet50": "resnet50"}
HE_SCALED = ("Convolution", "Deconvolution", "FullyConnected", "InnerProduct")
WORK_TOLERANCE = 0.03  # multiply-adds of eager's network vs the IR's: beyond this a goal against eager is void


# ----------------------------------------------------------------------------- weights
def make_weights(xml_path: str) -> str:
    """Writes the .bin of an IR .xml (v2 blobs: offset and size in bytes): conv
    and fully connected weights normal with std sqrt(2 / fan_in) (He), other
    weights 1 + 0.1 * normal, biases 0.01 * normal; each blob's values seeded by
    its layer and blob name, so that an FP16 IR gets its FP32 twin's values."""
    root = ET.parse(xml_path).getroot()
    blobs, end = [], 0
    for layer in root.iter("layer"):
        node = layer.find("blobs")
        if node is None:
            continue
        half = layer.get("precision") == "FP16"
        data = layer.find("data")
        outputs = int((data.get("output") or data.get("out-size") or 0) if data is not None else 0)
        for blob in node:
            offset, size = int(blob.get("offset")), int(blob.get("size"))
            blobs.append((layer.get("name"), layer.get("type"), blob.tag, offset, size, half, outputs))
            end = max(end, offset + size)
    out = bytearray(end)
    for name, kind, tag, offset, size, half, outputs in blobs:
        count = size // (2 if half else 4)
        rng = np.random.default_rng(zlib.crc32(f"{name}/{tag}".encode()))
        values = rng.standard_normal(count)
        if tag == "weights" and kind in HE_SCALED and outputs:
            values *= np.sqrt(2.0 / max(count // outputs, 1))
        elif tag == "weights":
            values = 1.0 + 0.1 * values
        else:
            values *= 0.01
        raw = values.astype(np.float32).astype(np.float16 if half else np.float32).tobytes()
        out[offset:offset + size] = raw
    bin_path = os.path.splitext(xml_path)[0] + ".bin"
    with open(bin_path + ".tmp", "wb") as f:
        f.write(out)
    os.replace(bin_path + ".tmp", bin_path)
    return bin_path


def ir_file(model: str, precision: str, ir_dir: str | None) -> str:
    """The model's IR: <ir_dir>/<model>_<precision>.xml, or converted once (batch 1)
    into $MO_CORE_HOME/bench-models/gpu-ir from the benchmarks' models."""
    if ir_dir:
        xml = os.path.join(ir_dir, f"{model}_{precision}.xml")
        if not os.path.isfile(xml):
            raise SystemExit(f"{xml} is missing (--ir-dir holds <model>_<FP32|FP16>.xml)")
        if not os.path.isfile(os.path.splitext(xml)[0] + ".bin"):
            make_weights(xml)
        return xml
    sys.path.insert(0, ROOT)
    from benchmarks.infer import convert_ours, model_files
    from benchmarks.references import HOME
    out = os.path.join(HOME, "bench-models", "gpu-ir")
    xml = os.path.join(out, f"{model}_{precision}.xml")
    files = model_files(model)
    source = files.get("pb") or files["weights"]
    if not os.path.isfile(xml) or os.path.getmtime(xml) < os.path.getmtime(source):
        os.makedirs(out, exist_ok=True)
        convert_ours(model, out, f"{model}_{precision}", 1, "--data_type", precision)
    return xml


# ----------------------------------------------------------------------------- the work (multiply-adds)
def _kernel_area(data: dict) -> int:
    """kh * kw of an IR v2 convolution ("kernel-x"/"kernel-y", or "kernel": "h,w")."""
    if "kernel-x" in data:
        return int(data["kernel-x"]) * int(data.get("kernel-y", data["kernel-x"]))
    return int(np.prod([int(k) for k in str(data["kernel"]).split(",")]))


def layer_macs(layer) -> int:
    """Multiply-adds of one IR (v2) layer: convolutions and fully connected ones (pooling,
    LRN, ReLU, SoftMax are not counted, on either side: torch_macs counts the same)."""
    out = int(np.prod(layer.outputs[0].dims)) if layer.outputs else 0
    if layer.type == "Convolution":
        group = int(layer.data.get("group", 1))
        return out * layer.inputs[0].dims[1] // group * _kernel_area(layer.data)
    if layer.type == "Deconvolution":
        group = int(layer.data.get("group", 1))
        return int(np.prod(layer.inputs[0].dims)) * layer.outputs[0].dims[1] // group * _kernel_area(layer.data)
    if layer.type in ("FullyConnected", "InnerProduct"):
        return out * int(np.prod(layer.inputs[0].dims[1:]))
    return 0


def ir_work(network) -> tuple[list, int]:
    """(input shape, multiply-adds per image) of an IR."""
    dims = list(network.inputs()[0].outputs[0].dims)
    return dims, sum(layer_macs(layer) for layer in network.layers) // dims[0]


# ----------------------------------------------------------------------------- engines (child processes)
def _device_facts(device) -> dict:
    return {"device": device.name, "platform": device.platform, "driver": device.cl_device.driver_version.strip(),
            "gpu": device.is_gpu, "fp16_arithmetic": device.has_fp16, "tensor_cores": device.tensor_cores}


def head_inputs(network) -> list[str]:
    """The layers that feed the network's SoftMax / DetectionOutput outputs (the
    logits, SSD's box and class tensors): compared where the heads' outputs would
    hide a difference (a saturated SoftMax, detections reordered among equals)."""
    readers = {e.from_layer for e in network.edges}
    by_id = {layer.id: layer for layer in network.layers}
    heads = {layer.id for layer in network.layers if layer.id not in readers
             and layer.type in ("SoftMax", "Softmax", "DetectionOutput")}
    return sorted({by_id[e.from_layer].name for e in network.edges if e.to_layer in heads
                   and by_id[e.from_layer].type != "Input"})


def check_against_cpu(network, device, plan_class, name, x, out) -> dict:
    """Max |diff| / max |ref| against the CPU plan: over the outputs, and over the
    inputs of the SoftMax / DetectionOutput heads (a plan of its own returns them);
    top-1 of classifiers."""
    from device_daemons.cpu import ExecutionPlan
    extra = head_inputs(network)
    ref_plan = ExecutionPlan(network, extra_outputs=extra or None)
    if x.shape != ref_plan.input_shapes()[name]:
        ref_plan.reshape({name: x.shape})
    ref = ref_plan.infer({name: x})

    def err(a, b):
        b = np.asarray(b, np.float64)
        return float(np.abs(np.asarray(a, np.float64) - b).max() / max(np.abs(b).max(), 1e-30))
    result = {"rel_err_outputs": max(err(out[k], ref[k]) for k in out)}
    same = [bool((out[k].argmax(1) == np.asarray(ref[k]).argmax(1)).all()) for k in out if np.ndim(out[k]) == 2]
    result["top1_same"] = all(same) if same else None
    if extra:
        plan = plan_class(network, device, extra_outputs=extra)
        if x.shape != plan.input_shapes()[name]:
            plan.reshape({name: x.shape})
        got = plan.infer({name: x})
        result["rel_err_heads"] = max(err(got[k], ref[k]) for k in extra)
        result["heads"] = extra
    result["rel_err_vs_cpu"] = result.get("rel_err_heads", result["rel_err_outputs"])
    return result


def engine_plan(args) -> list[dict]:
    """GpuPlan in-process for each precision and batch (see the module doc)."""
    if args.tree:
        sys.path.insert(0, args.tree)
    else:
        sys.path.insert(0, ROOT)
    from device_daemons.gpu import GpuPlan, open_device
    from ir import read_ir
    device = open_device("GPU")
    rows = []
    for precision in args.precisions:
        xml = ir_file(args.model, precision, args.ir_dir)
        network = read_ir(xml)
        _, macs = ir_work(network)
        start = time.perf_counter()
        plan = GpuPlan(network, device)
        tuned = getattr(plan, "tuning_s", 0.0)  # (a baseline tree has no tuner)
        cost = (time.perf_counter() - start - tuned, tuned)  # (build, tuning) of the shapes in use
        name = list(plan.input_shapes())[0]
        for batch in args.batches:
            row = dict(_device_facts(device), engine=args.label or "plan", model=args.model, precision=precision,
                       batch=batch, style=plan.ctx.style, tune=os.environ.get("MO_CORE_GPU_TUNE", "default"))
            shape = (batch,) + tuple(plan.input_shapes()[name][1:])
            if shape != plan.input_shapes()[name]:
                start, before = time.perf_counter(), getattr(plan, "tuning_s", 0.0)
                plan.reshape({name: shape})
                tuned = getattr(plan, "tuning_s", 0.0) - before
                cost = (time.perf_counter() - start - tuned, tuned)
            row["build_s"], row["tuning_s"], row["macs"] = round(cost[0], 2), round(cost[1], 2), macs
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            start = time.perf_counter()
            out = plan.infer({name: x})
            row["first_ms"] = round((time.perf_counter() - start) * 1e3, 1)
            row["median_ms"], row["best_ms"] = measure_ms(lambda: plan.infer({name: x}), args.iterations, warmup=3)
            if hasattr(plan, "create_request"):
                request = plan.create_request()
                row["launches"] = len(request.actions)
                if hasattr(request, "segments"):  # how the launches are enqueued
                    row["enqueue"] = "c_loop" if request.segments is not None else "pyopencl"
                hosts = {st.layer.name: getattr(st.kernel, "backend", "host") + (
                    f" ({st.kernel.native_unavailable[:200]})" if getattr(st.kernel, "native_unavailable", "") else "")
                    for st in plan.steps if st.kernel.host}
                if hosts:
                    row["host_steps"] = hosts
            if args.profile:
                perf = []
                plan.infer({name: x}, perf)
                by_type: dict = {}
                for r in perf:
                    by_type[r.type] = by_type.get(r.type, 0.0) + float(r.ms)
                row["profile_ms_by_type"] = {k: round(v, 3) for k, v in sorted(by_type.items(), key=lambda kv: -kv[1])}
                # the slowest layers with the configuration the search gave each (synchronized after every step)
                configs = {r["layer"]: r["config"] for r in getattr(getattr(plan, "tuner", None), "report", [])}
                row["profile_top"] = [[r.name, r.type, round(float(r.ms), 3), configs.get(r.name)]
                                      for r in sorted(perf, key=lambda r: -float(r.ms))[:12]]
            if plan.warnings:
                row["warnings"] = plan.warnings[:5]
            if hasattr(plan, "tuner"):
                row["configs"] = sorted({json.dumps(r["config"], sort_keys=True) for r in plan.tuner.report})[:40]
            if args.check:
                row.update(check_against_cpu(network, device, GpuPlan, name, x, out))
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def engine_daemon(args) -> list[dict]:
    """The GPU daemon through IECore, a private daemon for this process."""
    sys.path.insert(0, ROOT)
    from device_daemons.client import IECore
    from device_daemons.gpu import open_device
    from ir import read_ir
    device = open_device("GPU")
    facts = _device_facts(device)
    rows = []
    ie = IECore(policy="auto", timeout=600)
    try:
        for precision in args.precisions:
            xml = ir_file(args.model, precision, args.ir_dir)
            for batch in args.batches:
                net = ie.read_network(xml)
                net.batch_size = batch
                name = list(net.inputs)[0]
                start = time.perf_counter()
                exec_net = ie.load_network(net, "GPU")
                load = time.perf_counter() - start
                x = np.random.default_rng(0).standard_normal(net.inputs[name]).astype(np.float32)
                computes = []

                def request():
                    exec_net.infer({name: x})
                    computes.append(exec_net.compute_us)  # (the daemon's, in its reply)
                median, best = measure_ms(request, args.iterations, warmup=15 if args.iterations > 1 else 3)
                timed = [c for c in computes[-args.iterations:] if c is not None]
                compute = statistics.median(timed) if timed else None
                row = dict(facts, engine=args.label or "daemon", model=args.model, precision=precision, batch=batch,
                           median_ms=median, best_ms=best, load_s=round(load, 2), macs=ir_work(read_ir(xml))[1],
                           daemon_compute_ms=None if compute is None else round(compute / 1e3, 3),
                           env={k: v for k, v in os.environ.items() if k in (
                               "MO_CORE_SHM", "MO_CORE_SPIN_US", "MO_CORE_GPU_TUNE", "MO_CORE_GPU_ENQUEUE",
                               "MO_CORE_GPU_MERGE")})
                status = ie._link("GPU").call("status")[0]
                row["local_requests"] = status.get("local_requests")
                exec_net.close()
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        ie.close()
    return rows


def _caffe_googlenet(nn, net) -> None:
    """torchvision's googlenet made Caffe's: 5x5 convolutions in the inception blocks'
    third branch (torchvision keeps a 3x3 there), the LRNs after pool1 and conv2/3x3."""
    for block in [m for m in net.modules() if type(m).__name__ == "Inception"]:
        conv = block.branch3[1].conv
        block.branch3[1].conv = nn.Conv2d(conv.in_channels, conv.out_channels, 5, padding=2, bias=False)
    net.maxpool1 = nn.Sequential(net.maxpool1, _lrn(nn))
    net.conv3 = nn.Sequential(net.conv3, _lrn(nn))


def _lrn(nn):
    return nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)  # Caffe's LRN of these nets (across channels)


def _caffe_alexnet_features(nn):
    """bvlc_alexnet's convolutional part (its fully connected part is torchvision's)."""
    return nn.Sequential(
        nn.Conv2d(3, 96, 11, stride=4), nn.ReLU(inplace=True), _lrn(nn), nn.MaxPool2d(3, 2, ceil_mode=True),
        nn.Conv2d(96, 256, 5, padding=2, groups=2), nn.ReLU(inplace=True), _lrn(nn), nn.MaxPool2d(3, 2, ceil_mode=True),
        nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(384, 384, 3, padding=1, groups=2), nn.ReLU(inplace=True),
        nn.Conv2d(384, 256, 3, padding=1, groups=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True))


def _resnet_v1(net) -> None:
    """torchvision's resnet50 (v1.5) made v1, as Keras' ResNet50: a stage's stride 2 on
    its first block's 1x1 convolution instead of the 3x3 (fewer multiply-adds)."""
    for stage in (net.layer2, net.layer3, net.layer4):
        stage[0].conv1.stride, stage[0].conv2.stride = (2, 2), (1, 1)


def fold_batchnorm(torch, net) -> int:
    """Folds every BatchNorm2d into the Conv2d registered just before it in the same
    module (torchvision registers them in the order they run: BasicConv2d, Bottleneck,
    the stems, downsample) and leaves an Identity: one kernel per convolution, as the
    IR has. The number folded; an error if one is left unfolded."""
    from torch.nn.utils.fusion import fuse_conv_bn_eval
    folded = 0
    for parent in list(net.modules()):
        previous = None
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.BatchNorm2d) and previous is not None:
                setattr(parent, previous[0], fuse_conv_bn_eval(previous[1], child))
                setattr(parent, name, torch.nn.Identity())
                folded += 1
            previous = (name, child) if isinstance(child, torch.nn.Conv2d) else None
    if any(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules()):
        raise RuntimeError("a BatchNorm2d without its convolution before it: not folded")
    return folded


def _random_statistics(torch, net) -> None:
    """Random BatchNorm parameters and statistics (as tests/tf/keras_apps.py gives Keras'):
    at their initial (1, 0, 0, 1) a conv folded with the wrong BatchNorm would go unseen."""
    gen = torch.Generator().manual_seed(0)
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            m.weight.copy_(0.5 + torch.rand(n, generator=gen))
            m.bias.copy_(0.2 * torch.randn(n, generator=gen))
            m.running_mean.copy_(0.1 * torch.randn(n, generator=gen))
            m.running_var.copy_(0.5 + torch.rand(n, generator=gen))


def torch_twin(torch, torchvision, model, image):
    """(the torch network for `model` in eval mode, BatchNorms folded, a SoftMax appended;
    the relative difference of its logits from the unfolded network's on a random input
    of shape `image`, (channels, height, width))."""
    nn, models = torch.nn, torchvision.models
    if model == "bvlc_googlenet":
        net = models.googlenet(weights=None, aux_logits=False, init_weights=True)
        _caffe_googlenet(nn, net)
    elif model == "bvlc_alexnet":
        net = models.alexnet(weights=None)
        net.features, net.avgpool = _caffe_alexnet_features(nn), nn.Identity()  # (Caffe's pool5 is 6x6 already)
    else:
        net = models.resnet50(weights=None)
        _resnet_v1(net)
    net.eval()
    with torch.no_grad():
        _random_statistics(torch, net)
        x = torch.randn(1, *image)
        before = net(x)
        fold_batchnorm(torch, net)
        err = float((net(x) - before).abs().max() / before.abs().max().clamp_min(1e-30))
    return nn.Sequential(net, nn.Softmax(dim=1)).eval(), err


def torch_macs(torch, net, x) -> int:
    """Multiply-adds of one forward of `net` on x per image: its Conv2d and Linear
    modules (the same layers ir_work counts)."""
    total = [0]

    def hook(module, inputs, output):
        if isinstance(module, torch.nn.Conv2d):
            area = module.kernel_size[0] * module.kernel_size[1]
            total[0] += output.numel() * module.in_channels // module.groups * area
        else:
            total[0] += output.numel() * module.in_features
    counted = (torch.nn.Conv2d, torch.nn.Linear)
    handles = [m.register_forward_hook(hook) for m in net.modules() if isinstance(m, counted)]
    try:
        with torch.no_grad():
            net(x)
    finally:
        for h in handles:
            h.remove()
    return total[0] // x.shape[0]


def _ir_input(args) -> list:
    """The input shape of our IR of args.model (the twin is fed the same)."""
    from ir import read_ir
    precision = "FP32" if "FP32" in args.precisions else args.precisions[0]
    return ir_work(read_ir(ir_file(args.model, precision, args.ir_dir)))[0]


def engine_torch(args) -> list[dict]:
    """PyTorch eager on the twin of the model (torch_twin; CUDA)."""
    twin = TORCH_TWINS.get(args.model)
    base = {"engine": "torch", "model": args.model}
    try:
        import torch
        import torchvision
    except ImportError as exc:
        print(json.dumps(dict(base, error=f"PyTorch / torchvision is not installed ({exc})")))
        return []
    if twin is None or not torch.cuda.is_available():
        why = "no torchvision twin (an SSD-style net of this repository)" if twin is None else "no CUDA device"
        print(json.dumps(dict(base, error=why)))
        return []
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    image = _ir_input(args)[1:]  # (channels, height, width) as our IR's
    rows = []
    with torch.no_grad():
        for precision in args.precisions:
            model, fold_err = torch_twin(torch, torchvision, args.model, image)
            if fold_err > 1e-4:  # (float32 rounding alone is ~1e-7)
                raise RuntimeError(f"folding the BatchNorms changed {twin}'s logits by {fold_err:.2e}")
            model = model.cuda()
            macs = torch_macs(torch, model, torch.randn(1, *image, device="cuda"))
            dtype = torch.float16 if precision == "FP16" else torch.float32
            model = model.to(dtype)
            for batch in args.batches:
                x = torch.randn(batch, *image, device="cuda", dtype=dtype)
                host = torch.randn(batch, *image)  # float32 in host memory, as our plans take their inputs

                def run():
                    model(x)
                    torch.cuda.synchronize()

                def run_io():  # the same work as our plans: a host array in, a float32 host array out
                    model(host.to("cuda").to(dtype)).float().cpu()
                facts = dict(twin=twin, precision=precision, batch=batch, device=torch.cuda.get_device_name(),
                             torch=torch.__version__, cudnn=torch.backends.cudnn.version(), tf32=False, macs=macs,
                             input=[batch, *image], bn_fold_err=fold_err)
                for engine, fn in (("torch", run), ("torch_io", run_io)):
                    median, best = measure_ms(fn, args.iterations, warmup=5)
                    row = dict(base, engine=engine, median_ms=median, best_ms=best, **facts)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    return rows


ENGINES = {"plan": engine_plan, "daemon": engine_daemon, "torch": engine_torch}


def run_child(engine: str, model: str, opts, extra_env=None, label=None, tree=None, timeout=None) -> list[dict]:
    """One engine of one model in a fresh process; its rows (or one row with the error)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--engine", engine, "--model", model,
           "--batches", ",".join(map(str, opts.batches)), "--precisions", ",".join(opts.precisions),
           "--iterations", str(opts.iterations)]
    cmd += ["--ir-dir", opts.ir_dir] if opts.ir_dir else []
    cmd += ["--label", label] if label else []
    cmd += ["--tree", tree] if tree else []
    cmd += ["--check"] if getattr(opts, "check", False) else []
    cmd += ["--profile"] if getattr(opts, "profile", False) else []
    env = dict(os.environ, **(extra_env or {}))
    runtime = None
    if engine == "torch":  # torch's own numpy, not the one our site directory may carry
        env.pop("PYTHONPATH", None)
    if engine == "daemon":
        runtime = tempfile.mkdtemp(prefix="mo-gpu-rt-")
        env["MO_CORE_RUNTIME_DIR"] = runtime
    try:
        # a session of its own for every engine, as the daemons have (core/microkernel/launcher.py): with
        # autogroup scheduling an engine in this benchmark's session would share its CPU share on a busy machine
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout or opts.timeout, cwd=ROOT,
                           start_new_session=True)
        rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        if p.returncode:
            rows.append({"engine": label or engine, "model": model, "error": p.stderr[-1500:]})
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        rows.append({"engine": label or engine, "model": model, "error": f"timed out after {exc.timeout} s"})
    finally:
        if runtime:
            subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env, capture_output=True,
                           cwd=ROOT, timeout=60)
    return rows


# ----------------------------------------------------------------------------- the table
def _find(rows, engine, model, precision, batch):
    for r in rows:
        if r.get("engine") == engine and r.get("model") == model and r.get("precision") == precision \
                and r.get("batch") == batch and "median_ms" in r:
            return r
    return None


def _ms(row):
    return "-" if row is None else "{:.2f} ({:.2f})".format(row["median_ms"], row["best_ms"])


def work_gap(ours, eager):
    """eager's multiply-adds per image over ours, minus 1 (None where a row lacks them)."""
    if not (ours and eager and ours.get("macs") and eager.get("macs")):
        return None
    return eager["macs"] / ours["macs"] - 1.0


def _gmacs(ours, eager):
    """The table's work column: GMAC per image, ours / eager's."""
    def one(row):
        return "-" if row is None or not row.get("macs") else "{:.2f}".format(row["macs"] / 1e9)
    gap = work_gap(ours, eager)
    return "{}/{}{}".format(one(ours), one(eager), "" if gap is None or abs(gap) <= WORK_TOLERANCE else "!")


def eager_verdict(ok, ours, eager) -> str:
    """met / NOT met against eager, or not comparable where the works differ (WORK_TOLERANCE)."""
    gap = work_gap(ours, eager)
    if gap is None:
        return ("met" if ok else "NOT met") + " (the works' multiply-adds unknown)"
    if abs(gap) > WORK_TOLERANCE:
        return "not comparable: eager's network does {:.1%} {} multiply-adds than ours ({:.2f} vs {:.2f} GMAC per " \
               "image)".format(abs(gap), "more" if gap > 0 else "fewer", eager["macs"] / 1e9, ours["macs"] / 1e9)
    return "met" if ok else "NOT met"


def print_table(rows, extra_rows=()):
    devices = sorted({(r["device"], r.get("platform", ""), r.get("driver", "")) for r in rows
                      if r.get("engine") in ("plan", "daemon") and "device" in r})
    for name, platform, driver in devices:
        print("OpenCL device: {} ({}), driver {}".format(name, platform, driver))
    torch_devices = sorted({(r["device"], r["torch"], r.get("cudnn")) for r in rows if r.get("engine") == "torch"
                            and "device" in r})
    for name, version, cudnn in torch_devices:
        print("PyTorch {} eager on {} (cuDNN {}), TF32 off".format(version, name, cudnn))
    models = [m for m in MODELS if any(r.get("model") == m for r in rows)]
    head = "{:<15}{:>6}{:>6}{:>19}{:>19}{:>9}{:>19}{:>19}{:>11}{:>9}{:>12}{:>8}{:>17}".format(
        "model", "batch", "prec", "plan ms (min)", "daemon ms (min)", "rt ms", "eager ms (min)", "eager+io (min)",
        "plan/eager", "fps plan", "err vs CPU", "tune s", "GMAC ours/eager")
    print("median (min) of the iterations; rt: daemon - plan; fps at batch > 1; eager: its input on the GPU, "
          "eager+io: a host array in and out, as our plans and daemons take them (the equal work); GMAC: "
          "multiply-adds per image, ours from the IR, eager's from its modules (! : they differ by more than "
          "{:.0%}); every engine in a process and session of its own".format(WORK_TOLERANCE))
    print(head)
    for model in models:
        for batch in sorted({r["batch"] for r in rows if r.get("model") == model and "batch" in r}):
            for precision in ("FP32", "FP16"):
                plan = _find(rows, "plan", model, precision, batch)
                daemon = _find(rows, "daemon", model, precision, batch)
                eager = _find(rows, "torch", model, precision, batch)
                eager_io = _find(rows, "torch_io", model, precision, batch)
                if plan is None and daemon is None and eager is None:
                    continue
                rt = "-" if plan is None or daemon is None else "{:+.2f}".format(daemon["median_ms"] - plan["median_ms"])
                ratio = "-" if plan is None or eager is None else "{:.2f}".format(plan["median_ms"] / eager["median_ms"])
                fps = "-" if plan is None or batch == 1 else "{:.0f}".format(1e3 * batch / plan["median_ms"])
                err = "-" if plan is None or plan.get("rel_err_vs_cpu") is None else "{:.1e}{}".format(
                    plan["rel_err_vs_cpu"], "" if plan.get("top1_same") in (True, None) else " top1!")
                tune = "-" if plan is None else "{:.1f}".format(plan.get("tuning_s", 0.0))
                print("{:<15}{:>6}{:>6}{:>19}{:>19}{:>9}{:>19}{:>19}{:>11}{:>9}{:>12}{:>8}{:>17}".format(
                    model, batch, precision, _ms(plan), _ms(daemon), rt, _ms(eager), _ms(eager_io), ratio, fps, err,
                    tune, _gmacs(plan or daemon, eager)))
    for r in rows:
        if "error" in r:
            print("[ {} {} ] {}".format(r.get("engine"), r.get("model"), r["error"].strip().splitlines()[-1][:300]
                                        if r["error"].strip() else "failed"))
    for r in rows:  # labelled plans (a device check's variants, e.g. MO_CORE_GPU_SKIP) against the plan
        if r.get("engine", "plan") not in ENGINES and r.get("engine") != "torch_io" and "median_ms" in r:
            base = _find(rows, "plan", r["model"], r["precision"], r["batch"])
            print("{} {} b{} {}: {}{}".format(r["engine"], r["model"], r["batch"], r["precision"], _ms(r),
                                              "" if base is None else ", {:.2f}x the plan's".format(
                                                  r["median_ms"] / base["median_ms"])))
    for r in extra_rows:
        if "median_ms" in r:
            print("(measured elsewhere) {} {} b{} {} on {}: {}".format(r.get("engine"), r.get("model"), r.get("batch"),
                                                                       r.get("precision"), r.get("device"), _ms(r)))
    goals(rows)
    print("load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


def goals(rows):
    """The issue's goals, where the rows have what they need."""
    def get(engine, model, precision, batch):
        return _find(rows, engine, model, precision, batch)
    g = "bvlc_googlenet"
    daemon, eager = get("daemon", g, "FP32", 1), get("torch", g, "FP32", 1)
    if daemon and eager:
        print("goal GoogLeNet b1 FP32 daemon <= eager: {:.2f} vs {:.2f} ms: {}".format(
            daemon["median_ms"], eager["median_ms"], eager_verdict(daemon["median_ms"] <= eager["median_ms"], daemon,
                                                                   eager)))
    for model in MODELS:
        for batch in (1, 8):
            p32, p16 = get("plan", model, "FP32", batch), get("plan", model, "FP16", batch)
            if p32 and p16:
                ratio = p16["median_ms"] / p32["median_ms"]
                print("goal {} b{} FP16 <= 0.8 x FP32: {:.2f}: {}".format(model, batch, ratio,
                                                                         "met" if ratio <= 0.8 else "NOT met"))
            plan = get("plan", model, "FP32", batch)
            for engine, what in (("torch", "eager"), ("torch_io", "eager with host I/O (equal work)")):
                eager = get(engine, model, "FP32", batch)
                if not (plan and eager):
                    continue
                ratio = plan["median_ms"] / eager["median_ms"]
                print("goal {} b{} FP32 no slower than 1.5 x {}: {:.2f}: {}".format(
                    model, batch, what, ratio, eager_verdict(ratio <= 1.5, plan, eager)))
                if batch > 1:
                    print("goal {} b{} throughput >= {}'s: {:.0f} vs {:.0f} frames/s: {}".format(
                        model, batch, what, 1e3 * batch / plan["median_ms"], 1e3 * batch / eager["median_ms"],
                        eager_verdict(plan["median_ms"] <= eager["median_ms"], plan, eager)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--precisions", default="FP32,FP16")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--engines", default="plan,daemon,torch")
    parser.add_argument("--ir-dir", help="the IRs: <model>_<FP32|FP16>.xml (weights made when missing)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per engine and model (default 600)")
    parser.add_argument("--json", help="write every row there")
    parser.add_argument("--include-json", action="append", default=[], help="rows measured elsewhere to print too")
    parser.add_argument("--make-weights", metavar="DIR", help="write the .bin of every .xml in DIR, then exit")
    parser.add_argument("--table", metavar="JSON", help="print the table of rows saved with --json, then exit")
    parser.add_argument("--engine", choices=sorted(ENGINES), help=argparse.SUPPRESS)
    parser.add_argument("--label", help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)  # another checkout's plan (a baseline)
    parser.add_argument("--check", action="store_true", help="plan: compare with the CPU plan")
    parser.add_argument("--profile", action="store_true",
                        help="plan: per-layer-type times and the 12 slowest layers with their configurations")
    opts = parser.parse_args()
    opts.batches = [int(b) for b in opts.batches.split(",") if b]
    opts.precisions = [p for p in opts.precisions.split(",") if p]
    if opts.make_weights:
        for name in sorted(os.listdir(opts.make_weights)):
            if name.endswith(".xml"):
                print(make_weights(os.path.join(opts.make_weights, name)))
        return
    if opts.table:
        with open(opts.table) as f:
            print_table(json.load(f))
        return
    if opts.engine:
        ENGINES[opts.engine](opts)
        return
    os.environ.setdefault("GLOG_minloglevel", "2")
    opts.check = True
    extra = []
    for path in opts.include_json:
        with open(path) as f:
            extra += json.load(f)
    rows = []
    for model in opts.models.split(","):
        for engine in opts.engines.split(","):
            rows += run_child(engine, model, opts, label=opts.label)
            if opts.json:
                with open(opts.json, "w") as f:
                    json.dump(rows, f, indent=1)
    print_table(rows, extra)


if __name__ == "__main__":
    main()
