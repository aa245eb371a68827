"""`autoscale`: Dynamo's own planner resizes the pools while the graph serves, on every
placement (a process of the graph on one machine, hosts and Slurm; a `planner` component on
Kubernetes). Each pool's floor and ceiling are the pool's own `min_workers` and `max_workers`,
which `scale` and `apply` obey too."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, model_validator

from .base import MAX_SYSTEM_PORT, Strict


class AutoscaleTarget(StrEnum):
    """Dynamo 1.6.1's planner `optimization_target`s dis-serve offers."""

    LOAD = "load"
    LATENCY = "latency"
    THROUGHPUT = "throughput"
    SLA = "sla"

    @property
    def needs_latency_targets(self) -> bool:
        """Holds ttft_ms and itl_ms with its performance model (and Prometheus' view of the
        frontend, for its throughput loop)."""
        return self is AutoscaleTarget.SLA

    @property
    def reads_prometheus(self) -> bool:
        """Its throughput loop queries the frontend's metrics in Prometheus
        (PROMETHEUS_ENDPOINT); the others read the workers' forward-pass metrics from the
        event plane only."""
        return self is AutoscaleTarget.SLA

    @property
    def uses_load_thresholds(self) -> bool:
        """Scales on the thresholds of `autoscale.load` (the others have Dynamo's own)."""
        return self is AutoscaleTarget.LOAD


class LoadThresholds(Strict):
    """When the planner adds or removes a worker (`target: load`), from each worker's
    forward-pass metrics."""

    prefill_queue_tokens_up: int | None = Field(
        default=None, ge=0,
        description="Prompt tokens queued at a prefill worker that add a prefill worker "
                    "(default: the prefill pool's max_num_tokens, one full forward pass "
                    "waiting).")
    prefill_queue_tokens_down: int = Field(
        default=0, ge=0,
        description="Queued prompt tokens at or below which a prefill worker may go.")
    decode_kv_percent_up: float = Field(
        default=50.0, gt=0, le=100,
        description="KV-cache use (scheduled and queued, % of the worker's KV tokens) of a "
                    "decode worker that adds a decode worker.")
    decode_kv_percent_down: float = Field(
        default=10.0, ge=0, lt=100,
        description="KV-cache use below which a decode worker may go.")

    @model_validator(mode="after")
    def _ordered(self) -> LoadThresholds:
        if self.decode_kv_percent_down >= self.decode_kv_percent_up:
            raise ValueError(
                f"autoscale.load.decode_kv_percent_down {self.decode_kv_percent_down:g} must "
                f"be below decode_kv_percent_up {self.decode_kv_percent_up:g}; e.g. 10 and 50")
        up = self.prefill_queue_tokens_up
        if up is not None and self.prefill_queue_tokens_down >= up:
            raise ValueError(
                f"autoscale.load.prefill_queue_tokens_down {self.prefill_queue_tokens_down} "
                f"must be below prefill_queue_tokens_up {up}")
        return self


class Autoscale(Strict):
    """Dynamo's planner, which adds and removes workers as the load changes."""

    target: AutoscaleTarget | None = Field(
        default=None,
        description="load | latency | throughput | sla (the planner's optimization_target). "
                    "load, latency and throughput scale on each worker's queue and KV cache "
                    "(load: on `autoscale.load`'s thresholds; latency and throughput: on "
                    "Dynamo's own); sla holds ttft_ms and itl_ms with its performance model "
                    "and the frontend's metrics in Prometheus (`up --prometheus`). Default: "
                    "sla when ttft_ms and itl_ms are set, else load.")
    ttft_ms: float | None = Field(
        default=None, gt=0, description="Target time to first token, ms (target sla).")
    itl_ms: float | None = Field(
        default=None, gt=0, description="Target inter-token latency, ms (target sla).")
    max_gpus: int | None = Field(
        default=None, ge=1,
        description="GPU budget the planner may use (default: what the pools' max_workers "
                    "need, at most the hardware's GPUs). Dynamo 1.6.1's planner bounds the "
                    "total; each pool's own bounds are its min_workers and max_workers.")
    load: LoadThresholds = Field(default_factory=LoadThresholds,
                                 description="target load: when to add and remove workers.")
    throughput_interval_s: int = Field(
        default=60, ge=1,
        description="Seconds between SLA (throughput) decisions; NVIDIA's disagg_planner "
                    "example uses 60.")
    load_interval_s: int = Field(
        default=5, ge=1,
        description="Seconds between load decisions; must divide throughput_interval_s.")
    system_port: int = Field(
        default=9098, ge=1, le=MAX_SYSTEM_PORT - 1,
        description="Off Kubernetes: the planner's /health and /metrics port "
                    "(DYN_SYSTEM_PORT) on the head node; dis-serve's scaler beside it, which "
                    "carries out and acknowledges the planner's decisions, takes the next "
                    "port (Dynamo reads both as signed 16-bit numbers).")
    prometheus_url: str = Field(
        default="http://127.0.0.1:9090",
        description="Off Kubernetes, target sla: the Prometheus holding the frontend's "
                    "metrics (PROMETHEUS_ENDPOINT; `up --prometheus` runs one at this "
                    "default).")

    @model_validator(mode="before")
    @classmethod
    def _floors_moved(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for role in ("prefill", "decode", "agg"):
                if role in data:
                    raise ValueError(f"autoscale.{role} moved: its min_replicas is "
                                     f"pools.{role}.min_workers (scale and apply keep it too), "
                                     f"its ceiling pools.{role}.max_workers")
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Autoscale:
        if self.throughput_interval_s % self.load_interval_s or \
                self.load_interval_s >= self.throughput_interval_s:
            raise ValueError(
                f"autoscale.load_interval_s {self.load_interval_s} must be shorter than and "
                f"divide autoscale.throughput_interval_s {self.throughput_interval_s}; "
                "e.g. 5 and 60")
        if (self.ttft_ms is None) != (self.itl_ms is None):
            given, missing = (("ttft_ms", "itl_ms") if self.itl_ms is None
                              else ("itl_ms", "ttft_ms"))
            raise ValueError(f"autoscale.{given} is set but autoscale.{missing} is not; the "
                             "planner holds both or neither")
        if self.resolved_target.needs_latency_targets and (self.ttft_ms is None
                                                           or self.itl_ms is None):
            raise ValueError("autoscale.target sla needs autoscale.ttft_ms and itl_ms; set "
                             "both, or use target load")
        return self

    @property
    def resolved_target(self) -> AutoscaleTarget:
        if self.target is not None:
            return self.target
        both = self.ttft_ms is not None and self.itl_ms is not None
        return AutoscaleTarget.SLA if both else AutoscaleTarget.LOAD
