"""Per-layer performance counts on the client side: the daemon's rows (the `perf`
of an infer reply, contract.check_perf) in the Inference Engine's form."""
from __future__ import annotations


def perf_counts(rows: list[dict]) -> dict[str, dict]:
    """The daemon's perf rows (contract.check_perf) as the Inference Engine's
    get_perf_counts: {name: {status (EXECUTED, or NOT_RUN for a layer fused into
    another or computing nothing), layer_type, exec_type (the backend that ran it),
    real_time and cpu_time (us), execution_index, and where the daemon says them
    precision (what it computed in), note (why a reorder is there) and kernel (the
    backend's implementation, e.g. oneDNN's "brgconv:avx512_core")}}."""
    counts = {}
    for index, row in enumerate(rows):
        us = row["ms"] * 1e3
        counts[row["name"]] = {"status": "EXECUTED" if row["status"] == "executed" else "NOT_RUN",
                               "layer_type": row["type"], "exec_type": row["backend"],
                               "real_time": us, "cpu_time": us, "execution_index": index}
        counts[row["name"]].update({k: row[k] for k in ("precision", "note", "kernel") if k in row})
    return counts
