"""Correction factors fitted from measurement: `dis-serve plan --calibrate RESULTS...`.

Each `bench` result names the topology it ran on. For every measured point the planner's
model predicts the same deployment at the throughput AIPerf measured; the factors that make
the predictions meet the measurements are fitted per phase:
- decode: measured ITL against the predicted ITL at the batch that load gives (median ratio);
- prefill: what remains of the measured TTFT once the decode-paced part (the handoff's decode
  steps, waits for a slot), scaled by the decode factor, is taken out, against the predicted
  prefill pass and its queue (median ratio);
- KV transfer: fitted beside prefill by least squares when the results span prompt lengths
  whose transfer and prefill times are not proportional; otherwise it is not identifiable
  from them and stays 1.
The planner then plans with the factors (`PerfModel.calibrate`), and says so.
"""

from __future__ import annotations

import copy
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserInputError
from ..topology import Mode, Topology
from .outcome import Calibration, CalibrationPoint
from .perf_model import ModelOnGpu, PerfModel
from .pools import PrefillWorker, agg_curves, decode_curves
from .predict import Prediction, kv_transfer_gbps, predict_agg, predict_disagg, transfer_ms

# Prompt lengths whose prefill-to-transfer ratios spread less than this cannot tell the two
# factors apart.
IDENTIFIABLE_SPREAD = 0.05


@dataclass(frozen=True)
class Measured:
    """One benchmark point: the deployment, its workload and what AIPerf measured."""

    source: str
    topology: Topology
    isl: int
    osl: int
    rate_per_s: float
    ttft_ms: float
    itl_ms: float


def read_measurements(paths: list[Path], target: ModelOnGpu | None = None) -> list[Measured]:
    """Every usable point of the `bench` results at `paths` (results.json or its folder), or
    of a ledger (`.jsonl`: its entries for `target`'s model and GPU)."""
    from ..bench.report import RESULTS_JSON, read_result
    from ..inputs.yaml_input import load_model_file

    out = []
    for path in paths:
        if path.suffix == ".jsonl":
            out += _ledger_measurements(path, target)
            continue
        file = path / RESULTS_JSON if path.is_dir() else path
        if not file.is_file():
            raise UserInputError("no bench results here", source=str(path),
                                 fix=f"give a `bench` output folder or its {RESULTS_JSON}")
        result = read_result(file)
        if result.topology_file is None:
            raise UserInputError("these results do not name the topology they ran on",
                                 source=str(file), fix="rerun `bench` with a topology file")
        topo = load_model_file(Topology, Path(result.topology_file))
        for point in result.points:
            summary = point.aiperf
            if summary.ttft_ms is None or summary.itl_ms is None or summary.errors:
                continue
            out.append(Measured(
                f"{file}:{point.point.label}", topo, round(summary.input_tokens_mean),
                round(summary.output_tokens_mean), summary.request_throughput,
                summary.ttft_ms.avg, summary.itl_ms.avg))
    if not out:
        raise UserInputError("the results hold no streaming point without errors",
                             key="calibrate", fix="benchmark with a streaming scenario")
    return out


def _ledger_measurements(path: Path, target: ModelOnGpu | None) -> list[Measured]:
    """The ledger's measured points of this model on this GPU whose graph file is still
    there (the fit predicts each on the deployment it ran)."""
    from ..inputs.yaml_input import load_model_file
    from .ledger import read_ledger

    if not path.is_file():
        raise UserInputError("no ledger here", source=str(path),
                             fix="give the ledger bench writes (.dis-serve/ledger.jsonl)")
    out = []
    for e in read_ledger(path):
        if target is not None and (e.model, e.gpu) != (target.name, target.gpu_name):
            continue
        m = e.measured
        if not (e.topology_file and Path(e.topology_file).is_file() and m.ttft_mean_ms
                and m.itl_mean_ms and m.requests_per_s):
            continue
        out.append(Measured(f"{path}:{e.point}", load_model_file(Topology, Path(e.topology_file)),
                            round(e.measured_isl or e.isl), round(e.measured_osl or e.osl),
                            m.requests_per_s, m.ttft_mean_ms, m.itl_mean_ms))
    if not out:
        what = f" of {target.name} on {target.gpu_name}" if target else ""
        raise UserInputError(f"the ledger holds no measured point{what} whose graph file is "
                             "still there", source=str(path), key="calibrate",
                             fix="bench a graph `plan --emit` wrote for this model and GPU")
    return out


def predict_measured(model: PerfModel, m: Measured, gpus_per_node: int) -> Prediction | None:
    """The model's prediction for the measured deployment at the measured throughput."""
    topo, seq_len = m.topology, m.isl + m.osl
    if topo.mode is Mode.AGG:
        pool = topo.pools.agg
        assert pool is not None
        curves = agg_curves(model, [pool.tensor_parallel], m.isl, m.osl, seq_len)
        budget = pool.max_num_tokens - pool.max_batch_size
        curve = min(curves, key=lambda c: abs(c.ctx_tokens - budget))
        return predict_agg(curve, pool.workers, pool.max_batch_size, m.rate_per_s)
    prefill, decode = topo.pools.prefill, topo.pools.decode
    assert prefill is not None and decode is not None
    service = model.prefill_ms(prefill.tensor_parallel, 1, m.isl) * model.corrections.prefill
    worker = PrefillWorker(prefill.tensor_parallel, 1, service, service, prefill.max_num_tokens)
    curve = decode_curves(model, [decode.tensor_parallel], m.isl, m.osl, seq_len)[0]
    gbps = kv_transfer_gbps(prefill.tensor_parallel, decode.tensor_parallel,
                            topo.total_gpus > gpus_per_node)
    return predict_disagg(worker, prefill.workers, curve, decode.max_batch_size, decode.workers,
                          m.rate_per_s, osl=m.osl,
                          kv_transfer_ms=_transfer(model, m, gbps) * model.kv_transfer_scale)


def _transfer(model: PerfModel, m: Measured, gbps: float) -> float:
    return transfer_ms(model.target, m.isl, gbps)


def fit_calibration(model: PerfModel, measured: list[Measured],
                    gpus_per_node: int) -> Calibration:
    """Fit the factors on `measured` (see the module docstring); `model` is left as it is."""
    pairs = [(m, p) for m in measured
             if (p := predict_measured(model, m, gpus_per_node)) is not None]
    if not pairs:
        raise UserInputError("the planner's model cannot predict any measured point (each "
                             "is beyond what it expects the deployment to sustain)",
                             key="calibrate", fix="benchmark at lower load")
    decode = statistics.median(m.itl_ms / p.itl_ms for m, p in pairs)
    transfers = [_transfer_part(model, m, gpus_per_node) for m, _ in pairs]
    # What the measured TTFT leaves for prefill and transfer once the decode-paced part
    # (the handoff's steps less the transfer they cover, the wait for a slot) is scaled.
    rows = [(m.ttft_ms - decode * (p.handoff_ms - t + p.decode_wait_ms),
             p.service_ms + p.queue_wait_ms) for (m, p), t in zip(pairs, transfers, strict=True)]
    prefill, kv = _prefill_and_transfer(rows, transfers)
    calibrated = copy.copy(model)
    calibrated.calibrate(prefill, decode, kv or 1.0)
    points = []
    for m, p in pairs:
        c = predict_measured(calibrated, m, gpus_per_node) or p
        points.append(CalibrationPoint(
            source=m.source, isl=m.isl, osl=m.osl, requests_per_s=m.rate_per_s,
            measured_ttft_ms=m.ttft_ms, measured_itl_ms=m.itl_ms,
            predicted_ttft_ms=p.ttft_mean_ms, predicted_itl_ms=p.itl_ms,
            calibrated_ttft_ms=c.ttft_mean_ms, calibrated_itl_ms=c.itl_ms))
    return Calibration(prefill=prefill, decode=decode, kv_transfer=kv, points=points)


def _transfer_part(model: PerfModel, m: Measured, gpus_per_node: int) -> float:
    topo = m.topology
    if topo.mode is Mode.AGG or topo.pools.prefill is None or topo.pools.decode is None:
        return 0.0
    gbps = kv_transfer_gbps(topo.pools.prefill.tensor_parallel,
                            topo.pools.decode.tensor_parallel, topo.total_gpus > gpus_per_node)
    return _transfer(model, m, gbps)


def _prefill_and_transfer(rows: list[tuple[float, float]],
                          transfers: list[float]) -> tuple[float, float | None]:
    """rows: (TTFT left for prefill and transfer, predicted prefill part). Transfer time
    grows with the prompt as prefill does, so with one prompt length only the prefill factor
    is fitted (transfer as predicted); with prompt lengths that separate them, both."""
    ratios = [t / r[1] for r, t in zip(rows, transfers, strict=True) if r[1] > 0 and t > 0]
    if len(ratios) >= 2 and (max(ratios) - min(ratios)) / max(ratios) > IDENTIFIABLE_SPREAD:
        # Least squares for left = prefill * part + kv * transfer.
        a11 = sum(r[1] ** 2 for r in rows)
        a12 = sum(r[1] * t for r, t in zip(rows, transfers, strict=True))
        a22 = sum(t * t for t in transfers)
        b1 = sum(r[0] * r[1] for r in rows)
        b2 = sum(r[0] * t for r, t in zip(rows, transfers, strict=True))
        det = a11 * a22 - a12 * a12
        if det > 0:
            return (b1 * a22 - b2 * a12) / det, (a11 * b2 - a12 * b1) / det
    return statistics.median((left - t) / part for (left, part), t
                             in zip(rows, transfers, strict=True) if part > 0), None
