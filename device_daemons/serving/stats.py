"""Per model version statistics, kept by the front end around every request (so
the embedded and the Ray mode count the same way): Triton's statistics extension
(/v2/models/{m}/stats, gRPC ModelStatistics) and Prometheus /metrics with Triton's
metric names, both read from the same counters."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from prometheus_client.core import Metric
from prometheus_client.registry import CollectorRegistry

DURATIONS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")


@dataclass
class VersionStats:
    durations: dict = field(default_factory=lambda: {k: [0, 0] for k in DURATIONS})  # [count, ns]
    inference_count: int = 0
    execution_count: int = 0
    last_inference_ms: int = 0
    batches: dict = field(default_factory=dict)  # batch size -> [count, input ns, infer ns, output ns]
    failures: dict = field(default_factory=dict)  # reason -> count


def _add(pair: list, ns: int) -> None:
    pair[0] += 1
    pair[1] += int(ns)


class Statistics:
    def __init__(self):
        self._lock = threading.Lock()
        self._stats: dict[tuple[str, str], VersionStats] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def _of(self, model: str, version: str) -> VersionStats:
        key = (model, version)
        stats = self._stats.get(key)
        if stats is None:
            stats = self._stats[key] = VersionStats()
        return stats

    def success(self, model: str, version: str, duration_ns: int, timings: dict) -> None:
        with self._lock:
            s = self._of(model, version)
            _add(s.durations["success"], duration_ns)
            _add(s.durations["queue"], timings.get("queue_ns", 0))
            for k in ("compute_input", "compute_infer", "compute_output"):
                _add(s.durations[k], timings.get(k + "_ns", 0))
            n = timings.get("request_batch", 1)
            s.inference_count += n
            s.last_inference_ms = int(time.time() * 1000)
            if timings.get("executed", 1):
                s.execution_count += 1
                row = s.batches.setdefault(int(timings.get("batch_size", 1)), [0, 0, 0, 0])
                row[0] += 1
                row[1] += timings.get("compute_input_ns", 0)
                row[2] += timings.get("compute_infer_ns", 0)
                row[3] += timings.get("compute_output_ns", 0)

    def failure(self, model: str, version: str, duration_ns: int, reason: str) -> None:
        with self._lock:
            s = self._of(model, version)
            _add(s.durations["fail"], duration_ns)
            s.failures[reason] = s.failures.get(reason, 0) + 1
            s.last_inference_ms = int(time.time() * 1000)

    def report(self, loaded: list[tuple[str, str]]) -> list[dict]:
        """Triton's model_stats entries for these (model, version) pairs."""
        out = []
        with self._lock:
            for model, version in loaded:
                s = self._stats.get((model, version)) or VersionStats()
                out.append({
                    "name": model, "version": version, "last_inference": s.last_inference_ms,
                    "inference_count": s.inference_count, "execution_count": s.execution_count,
                    "inference_stats": {k: {"count": c, "ns": ns} for k, (c, ns) in s.durations.items()},
                    "batch_stats": [{"batch_size": b, "compute_input": {"count": c, "ns": i},
                                     "compute_infer": {"count": c, "ns": f}, "compute_output": {"count": c, "ns": o}}
                                    for b, (c, i, f, o) in sorted(s.batches.items())]})
        return out

    # ----------------------------------------------------------------- Prometheus
    def collect(self):
        """Triton's metric names (counters, durations in microseconds)."""
        families = {
            "nv_inference_request_success": ("Number of successful inference requests, all batch sizes", "counter"),
            "nv_inference_request_failure": ("Number of failed inference requests, all batch sizes", "counter"),
            "nv_inference_count": ("Number of inferences performed (a batch of n counts n)", "counter"),
            "nv_inference_exec_count": ("Number of model executions performed", "counter"),
            "nv_inference_request_duration_us": ("Cumulative inference request duration in microseconds", "counter"),
            "nv_inference_queue_duration_us": ("Cumulative inference queuing duration in microseconds", "counter"),
            "nv_inference_compute_input_duration_us": ("Cumulative compute input duration in microseconds", "counter"),
            "nv_inference_compute_infer_duration_us": ("Cumulative compute inference duration in microseconds",
                                                       "counter"),
            "nv_inference_compute_output_duration_us": ("Cumulative inference compute output duration in "
                                                        "microseconds", "counter")}
        # prometheus_client writes a "counter" as NAME_total; these keep Triton's exact names (untyped)
        metrics = {name: Metric(name, doc, "unknown") for name, (doc, kind) in families.items()}
        with self._lock:
            items = [(k, v) for k, v in self._stats.items()]
            for (model, version), s in items:
                labels = {"model": model, "version": version}
                d = s.durations
                metrics["nv_inference_request_success"].add_sample("nv_inference_request_success", labels,
                                                                   d["success"][0])
                for reason, count in sorted(s.failures.items()):
                    metrics["nv_inference_request_failure"].add_sample(
                        "nv_inference_request_failure", dict(labels, reason=reason), count)
                metrics["nv_inference_count"].add_sample("nv_inference_count", labels, s.inference_count)
                metrics["nv_inference_exec_count"].add_sample("nv_inference_exec_count", labels, s.execution_count)
                metrics["nv_inference_request_duration_us"].add_sample(
                    "nv_inference_request_duration_us", labels, (d["success"][1] + d["fail"][1]) / 1000)
                for k in ("queue", "compute_input", "compute_infer", "compute_output"):
                    name = f"nv_inference_{k}_duration_us"
                    metrics[name].add_sample(name, labels, d[k][1] / 1000)
        return list(metrics.values())
