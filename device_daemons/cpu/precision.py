"""Inference precision and threads of the CPU plugin, as OpenVINO's CPU plugin has them.

INFERENCE_PRECISION_HINT (load_network config, `-infer_precision`): "f32" or "bf16".
Its default is OpenVINO's: bf16 where the CPU computes bf16 natively (AVX512_BF16 or
AMX: oneDNN's effective ISA, which ONEDNN_MAX_CPU_ISA can lower), f32 elsewhere and
where oneDNN is not available (the numpy kernels compute in f32). bf16 means: the
layers oneDNN runs in bf16 (convolution, inner product, pooling, element-wise, LRN,
softmax, concat and the reorders between them) take bf16 activations and weights
(converted once at load) and accumulate in f32; network inputs and outputs stay f32;
every other layer runs f32 (`-pc` shows each step's precision).

INFERENCE_NUM_THREADS (`-nthreads`): the OpenMP threads of a request; default and
maximum the CPUs this process may run on (os.sched_getaffinity, not os.cpu_count:
a container or `taskset` gives fewer).
"""
from __future__ import annotations

from ir import IRError

from .onednn.library import CPUS, NativeUnavailable, load

PRECISIONS = ("f32", "bf16")
PRECISION_KEY = "INFERENCE_PRECISION_HINT"
THREADS_KEY = "INFERENCE_NUM_THREADS"
_ALIASES = {"f32": "f32", "fp32": "f32", "float32": "f32", "bf16": "bf16", "bfloat16": "bf16"}


def native_bf16() -> bool:
    """Whether oneDNN computes bf16 natively here (AVX512_BF16 or AMX); False without oneDNN."""
    try:
        d = load()
    except NativeUnavailable:
        return False
    bf16 = d.lib.dnnl_cpu_isa_avx512_core_bf16  # the ISA values are bit sets: AMX includes these bits
    return (d.lib.dnnl_get_effective_cpu_isa() & bf16) == bf16


def default_precision() -> str:
    return "bf16" if native_bf16() else "f32"


def resolve_precision(hint, where: str = PRECISION_KEY) -> str:
    """"f32" or "bf16" for a hint (None or "": the default); IRError for anything else."""
    if hint is None or (isinstance(hint, str) and not hint.strip()):
        return default_precision()
    value = _ALIASES.get(str(hint).strip().lower()) if isinstance(hint, str) else None
    if value is None:
        raise IRError(f"{where} must be one of {', '.join(PRECISIONS)}, got {hint!r:.40}")
    return value


def resolve_threads(value, where: str = THREADS_KEY) -> int:
    """Threads of a request: value (None or 0: all the CPUs of the affinity mask), at most those."""
    if value is None:
        return CPUS
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = -1
    if isinstance(value, bool) or n < 0 or (isinstance(value, float) and value != n):
        raise IRError(f"{where} must be a number of threads >= 0 (0: all {CPUS} CPUs), got {value!r:.40}")
    return min(n, CPUS) if n else CPUS


def settings(plan, max_instances: int) -> dict:
    """What a loaded network got (the load reply's config): its precision, the threads of a
    request, and OPTIMAL_NUMBER_OF_INFER_REQUESTS: as many requests as threads (each then
    runs on its own core, no OpenMP team to wake; at most the daemon's plan instances)."""
    return {PRECISION_KEY: plan.precision_used, THREADS_KEY: plan.threads,
            "OPTIMAL_NUMBER_OF_INFER_REQUESTS": max(1, min(plan.threads, max_instances))}
