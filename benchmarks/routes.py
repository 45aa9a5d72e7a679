"""The routes to a fast CPU backend (issue 13), measured side by side on one network
with the same IR, weights and input, every route's output checked against the
numpy reference plan:

- numpy:    the reference kernels (im2col + BLAS sgemm, vectorized numpy passes)
- winograd: numpy with Winograd F(2x2, 3x3) for the 3x3 stride-1 convolutions
            (2.25x fewer multiplications, four extra memory-bound transforms)
- numba:    numba-compiled kernels (parallel loops) for the memory-bound work:
            im2col and the bias pass of convolutions, ReLU, pooling, LRN
- xla:      the whole network as one jax.jit function (XLA CPU), built from the IR
- onednn:   the oneDNN backend (blocked layouts, fused post-ops, arena)
Each route runs in its own process; per route: median and min of the whole
network, and the time per layer type (the plan's per-step counters) where the
route runs inside the plan. Routes whose package is missing (numba, jax) are
reported as such.

    python benchmarks/routes.py [--model bvlc_googlenet] [--iterations 30] [--routes numpy,winograd,...]
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ROUTES = ("numpy", "winograd", "numba", "xla", "onednn")


# --- Winograd F(2x2, 3x3) in numpy ---------------------------------------------------------
B_T = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float32)
G = np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]], np.float32)
A_T = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float32)


def winograd_kernel_class():
    from device_daemons.cpu.kernels.convolution import Convolution

    class WinogradConvolution(Convolution):
        type = "Convolution"

        def __init__(self, layer):
            super().__init__(layer)
            self.winograd = (self.kernel == (3, 3) and self.stride == (1, 1) and self.dilation == (1, 1)
                             and self.group == 1)
            if self.winograd:
                w = self.weights.reshape(self.output, -1, 3, 3)
                # U[xi, nu] = G g G^T: (4, 4, O, I)
                self.u = np.ascontiguousarray(np.einsum("ak,oikl,bl->aboi", G, w, G).reshape(16, self.output, -1))

        def forward(self, inputs):
            if not self.winograd:
                return super().forward(inputs)
            x = inputs[0]
            n, c, h, w = x.shape
            oh, ow = self._out_hw(h, w)
            th, tw = -(-oh // 2), -(-ow // 2)
            padded = np.zeros((n, c, 2 * th + 2, 2 * tw + 2), np.float32)
            padded[:, :, self.pad[0]:self.pad[0] + h, self.pad[1]:self.pad[1] + w] = x
            s = padded.strides
            tiles = np.lib.stride_tricks.as_strided(padded, (n, c, th, tw, 4, 4),
                                                    (s[0], s[1], 2 * s[2], 2 * s[3], s[2], s[3]))
            v = np.einsum("ak,ncijkl,bl->abcnij", B_T, tiles, B_T, optimize=True).reshape(16, c, -1)
            m = np.matmul(self.u, v).reshape(4, 4, self.output, n, th, tw)
            y = np.einsum("ak,klonij,bl->onijab", A_T, m, A_T, optimize=True)
            out = y.transpose(1, 0, 2, 4, 3, 5).reshape(n, self.output, 2 * th, 2 * tw)[:, :, :oh, :ow]
            out = np.ascontiguousarray(out)
            if self.bias is not None:
                out += self.bias.reshape(1, -1, 1, 1)
            return [out]
    return {"Convolution": WinogradConvolution}


# --- numba kernels for the memory-bound passes ---------------------------------------------
def numba_kernel_classes():
    import numba
    from device_daemons.cpu.kernels.activation import ReLU
    from device_daemons.cpu.kernels.convolution import Convolution
    from device_daemons.cpu.kernels.normalization import Norm
    from device_daemons.cpu.kernels.pooling import Pooling

    @numba.njit(parallel=True, cache=False)
    def im2col(x, kh, kw, sh, sw, ph, pw, oh, ow, col):
        c, h, w = x.shape
        for ci in numba.prange(c):
            for ky in range(kh):
                for kx in range(kw):
                    row = (ci * kh + ky) * kw + kx
                    for oy in range(oh):
                        iy = oy * sh + ky - ph
                        for ox in range(ow):
                            ix = ox * sw + kx - pw
                            col[row, oy * ow + ox] = x[ci, iy, ix] if 0 <= iy < h and 0 <= ix < w else 0.0

    @numba.njit(parallel=True, cache=False)
    def add_bias(out, bias):
        for o in numba.prange(out.shape[0]):
            out[o] += bias[o]

    @numba.njit(parallel=True, cache=False)
    def relu(x):
        flat = x.reshape(-1)
        for i in numba.prange(flat.size):
            if flat[i] < 0:
                flat[i] = 0.0

    @numba.njit(parallel=True, cache=False)
    def pool(x, out, kh, kw, sh, sw, ph, pw, is_max, inv):
        n, c, h, w = x.shape
        oh, ow = out.shape[2], out.shape[3]
        for nc in numba.prange(n * c):
            b, ch = nc // c, nc % c
            for oy in range(oh):
                for ox in range(ow):
                    acc = -np.inf if is_max else 0.0
                    for ky in range(kh):
                        iy = oy * sh + ky - ph
                        if iy < 0 or iy >= h:
                            continue
                        for kx in range(kw):
                            ix = ox * sw + kx - pw
                            if 0 <= ix < w:
                                v = x[b, ch, iy, ix]
                                acc = max(acc, v) if is_max else acc + v
                    out[b, ch, oy, ox] = acc if is_max else acc * inv[oy, ox]

    @numba.njit(parallel=True, cache=False)
    def lrn(x, out, size, alpha, beta, k):
        n, c, h, w = x.shape
        pre = (size - 1) // 2
        for nc in numba.prange(n * c):
            b, ch = nc // c, nc % c
            lo, hi = max(0, ch - pre), min(c, ch + pre + 1)
            for y in range(h):
                for xx in range(w):
                    s = 0.0
                    for j in range(lo, hi):
                        v = x[b, j, y, xx]
                        s += v * v
                    out[b, ch, y, xx] = x[b, ch, y, xx] * (k + alpha / size * s) ** -beta

    class NumbaConvolution(Convolution):
        type = "Convolution"

        def forward(self, inputs):
            if self.group != 1 or self.dilation != (1, 1):
                return super().forward(inputs)
            x = inputs[0]
            n, c, h, w = x.shape
            oh, ow = self._out_hw(h, w)
            (kh, kw), (sh, sw), (ph, pw) = self.kernel, self.stride, self.pad
            out = np.empty((n, self.output, oh * ow), np.float32)
            col = np.empty((c * kh * kw, oh * ow), np.float32)
            for i in range(n):
                im2col(x[i], kh, kw, sh, sw, ph, pw, oh, ow, col)
                np.dot(self.weights2d, col, out=out[i])
                if self.bias is not None:
                    add_bias(out[i], self.bias.ravel())
            return [out.reshape(n, self.output, oh, ow)]

    class NumbaReLU(ReLU):
        type = "ReLU"

        def forward(self, inputs):
            x = inputs[0] if self.inplace else inputs[0].copy()
            if self.slope != 0:
                return super().forward(inputs)
            relu(x)
            return [x]

    class NumbaPooling(Pooling):
        type = "Pooling"

        def forward(self, inputs):
            x = np.ascontiguousarray(inputs[0])
            n, c, h, w = x.shape
            self._prepare(h, w)
            oh, ow = self.out_hw
            out = np.empty((n, c, oh, ow), np.float32)
            inv = self.inv_count if self.method == "avg" else np.ones((oh, ow), np.float32)
            pool(x, out, self.kernel[0], self.kernel[1], self.stride[0], self.stride[1], self.pad[0], self.pad[1],
                 self.method == "max", inv)
            return [out]

    class NumbaNorm(Norm):
        type = "Norm"

        def forward(self, inputs):
            if self.region != "across":
                return super().forward(inputs)
            x = np.ascontiguousarray(inputs[0])
            out = np.empty_like(x)
            lrn(x, out, self.size, self.alpha, self.beta, self.k)
            return [out]
    return {"Convolution": NumbaConvolution, "ReLU": NumbaReLU, "Pooling": NumbaPooling, "Norm": NumbaNorm}


# --- XLA: the whole network as one jax function --------------------------------------------
def xla_function(plan):
    """jax.jit of the plan's network (the layer types of the bvlc nets), built from the
    numpy kernels' parsed attributes and weights."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from device_daemons.cpu.onednn.pooling import end_padding
    shapes = plan.shapes
    ops = []
    for step in plan.steps:
        k, t = step.kernel, step.layer.type
        if t == "Convolution":
            w = jnp.asarray(k.weights.reshape(k.output, -1, *k.kernel))
            b = None if k.bias is None else jnp.asarray(k.bias.reshape(1, -1, 1, 1))
            ops.append(lambda x, k=k, w=w, b=b: (lambda y: y if b is None else y + b)(lax.conv_general_dilated(
                x, w, k.stride, [(k.pad[0], k.pad_end[0]), (k.pad[1], k.pad_end[1])], rhs_dilation=k.dilation,
                feature_group_count=k.group, dimension_numbers=("NCHW", "OIHW", "NCHW"))))
        elif t == "ReLU":
            ops.append(lambda x, s=k.slope: jnp.where(x > 0, x, x * s))
        elif t == "Pooling":
            (_, _, h, w_), (_, _, oh, ow) = shapes[step.in_slots[0]], shapes[step.out_slots[0]]
            pads = [(0, 0), (0, 0), (k.pad[0], end_padding(h, oh, k.kernel[0], k.stride[0], k.pad[0])),
                    (k.pad[1], end_padding(w_, ow, k.kernel[1], k.stride[1], k.pad[1]))]
            dims, strides = (1, 1) + tuple(k.kernel), (1, 1) + tuple(k.stride)
            if k.method == "max":
                ops.append(lambda x, p=pads, d=dims, s=strides: lax.reduce_window(x, -jnp.inf, lax.max, d, s, p))
            else:
                k._prepare(h, w_)
                inv = jnp.asarray(k.inv_count)
                ops.append(lambda x, p=pads, d=dims, s=strides, inv=inv:
                           lax.reduce_window(x, 0.0, lax.add, d, s, p) * inv)
        elif t == "Norm":
            pre = (k.size - 1) // 2
            ops.append(lambda x, k=k, pre=pre: x * (k.k + k.alpha / k.size * lax.reduce_window(
                x * x, 0.0, lax.add, (1, k.size, 1, 1), (1, 1, 1, 1), [(0, 0), (pre, pre), (0, 0), (0, 0)]))
                ** -k.beta)
        elif t == "Concat":
            ops.append(lambda *xs, a=k.axis: jnp.concatenate(xs, axis=a))
        elif t == "FullyConnected":
            w, b = jnp.asarray(k.weights.T), None if k.bias is None else jnp.asarray(k.bias)
            ops.append(lambda x, w=w, b=b: (lambda y: y if b is None else y + b)(x.reshape(x.shape[0], -1) @ w))
        elif t in ("SoftMax", "Softmax"):
            ops.append(lambda x, a=k.axis: jax.nn.softmax(x, axis=a))
        else:
            raise SystemExit("the XLA route has no translation for layer type " + t)
    in_slot = next(iter(plan._input_slots.values()))
    outputs = plan._outputs

    def forward(x):
        slots = {in_slot: x}
        for step, op in zip(plan.steps, ops):
            slots[step.out_slots[0]] = op(*[slots[s] for s in step.in_slots])
        return {name: slots[s] for name, s in outputs}
    return jax.jit(forward)


# --- one route in this process -------------------------------------------------------------
def run_route(route, xml, iterations):
    from benchmarks.timing import measure
    from device_daemons.cpu.plan import ExecutionPlan
    from ir import read_ir
    network = read_ir(xml)
    name = network.inputs()[0].name
    reference = ExecutionPlan(network, backend="numpy")
    x = np.random.default_rng(0).standard_normal(reference.input_shapes()[name]).astype(np.float32)
    want = reference.infer({name: x})
    result = {}
    try:
        if route == "xla":
            fn = xla_function(reference)
            jx = __import__("jax").numpy.asarray(x)

            def call():
                return {k: np.asarray(v) for k, v in fn(jx).items()}
            plan = None
        else:
            kernels = {"winograd": winograd_kernel_class, "numba": numba_kernel_classes}.get(route, dict)()
            plan = ExecutionPlan(network, custom_kernels=kernels, backend="onednn" if route == "onednn" else "numpy")

            def call():
                return plan.infer({name: x})
    except ImportError as err:
        print(json.dumps({"missing": str(err)}))
        return
    got = call()
    result["error"] = max(float(np.abs(got[k] - v).max() / (np.abs(v).max() or 1)) for k, v in want.items())
    result["median"], result["min"] = measure(call, iterations, warmup=3)
    if plan is not None:
        per_type = collections.defaultdict(list)
        for _ in range(max(5, iterations // 3)):
            perf = []
            plan.infer({name: x}, perf)
            sums = collections.Counter()
            for row in perf:
                sums[row.type] += row.ms
            for t, ms in sums.items():
                per_type[t].append(ms)
        result["types"] = {t: statistics.median(v) for t, v in per_type.items()}
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bvlc_googlenet")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--routes", default=",".join(ROUTES))
    parser.add_argument("--route", help=argparse.SUPPRESS)
    parser.add_argument("--xml", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.route:
        return run_route(args.route, args.xml, args.iterations)
    from benchmarks.references import bvlc_model
    proto, weights = bvlc_model(args.model)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="mo-routes-") as tmp:
        subprocess.run([sys.executable, "-m", "cli", "convert", "--input_model", weights, "--input_proto", proto,
                        "-b", "1", "--output_dir", tmp, "--model_name", "model", "--silent"], check=True)
        xml = os.path.join(tmp, "model.xml")
        results = {}
        for route in [r for r in args.routes.split(",") if r]:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--route", route, "--xml", xml,
                                   "--iterations", str(args.iterations)], capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit("route {} failed:\n{}".format(route, proc.stderr[-3000:]))
            results[route] = json.loads(proc.stdout.strip().splitlines()[-1])
    print("{}, batch 1, {} iterations per route, each route alone in its own process".format(args.model,
                                                                                            args.iterations))
    base = results.get("numpy", {}).get("median")
    print("{:<10}{:>11}{:>10}{:>10}{:>14}".format("route", "median ms", "min ms", "vs numpy", "max rel err"))
    for route, r in results.items():
        if "missing" in r:
            print("{:<10}not measured: {} (pip install numba jax jaxlib)".format(route, r["missing"]))
            continue
        print("{:<10}{:>11.2f}{:>10.2f}{:>9.2f}x{:>14.2e}".format(route, r["median"] * 1e3, r["min"] * 1e3,
                                                                  r["median"] / base if base else float("nan"),
                                                                  r["error"]))
    typed = [(route, r["types"]) for route, r in results.items() if "types" in r]
    if typed:
        print()
        print("ms per layer type (median of the per-step counters):")
        types = sorted({t for _, ts in typed for t in ts}, key=lambda t: -max(ts.get(t, 0) for _, ts in typed))
        print("{:<16}".format("layer type") + "".join("{:>10}".format(route) for route, _ in typed))
        for t in types:
            print("{:<16}".format(t) + "".join("{:>10.2f}".format(ts.get(t, 0.0)) for _, ts in typed))
    print("load average before {:.2f} {:.2f} {:.2f}, after {:.2f} {:.2f} {:.2f} on {} CPUs".format(
        *load_before, *os.getloadavg(), os.cpu_count()))


if __name__ == "__main__":
    main()
