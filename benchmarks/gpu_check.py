"""`make gpu-check`: does a real TensorRT-LLM graph come up, serve and go down on this host?

For users with an H100/H200 host and TensorRT-LLM installed as the README says (the `gpu`
extra). It downloads a small public model (Qwen3-0.6B) into the Hugging Face cache, then runs
`dis-serve bench` on benchmarks/gpu/qwen3-0.6b-1p1d.yaml (one prefill and one decode worker on
GPUs 0 and 1): bench brings the graph up, drives the smoke scenario with AIPerf and stops it.
The last line is the verdict: PASS, FAIL or SKIP (no GPUs, no TensorRT-LLM). Never run in CI:
it is not part of `make test` or `make bench`.

    python benchmarks/gpu_check.py [--out DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GRAPH = REPO / "benchmarks" / "gpu" / "qwen3-0.6b-1p1d.yaml"
SCENARIO = REPO / "benchmarks" / "smoke.yaml"
DIS_SERVE = str(Path(sys.executable).with_name("dis-serve"))
GPUS_NEEDED = 2


def gpu_count() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    listed = subprocess.run(["nvidia-smi", "--list-gpus"], capture_output=True, text=True,
                            check=False)
    return len(listed.stdout.splitlines()) if listed.returncode == 0 else 0


def missing_prerequisite() -> str | None:
    if (gpus := gpu_count()) < GPUS_NEEDED:
        return f"{gpus} NVIDIA GPU(s) visible, {GPUS_NEEDED} needed (nvidia-smi --list-gpus)"
    if importlib.util.find_spec("tensorrt_llm") is None:
        return ("TensorRT-LLM is not installed: pip install -e '.[gpu]' "
                "--extra-index-url https://pypi.nvidia.com (README, Install)")
    return None


def fetch_model() -> None:
    # Workers run offline (HF_HUB_OFFLINE=1): the weights must be in the cache first.
    import yaml
    from huggingface_hub import snapshot_download

    snapshot_download(yaml.safe_load(GRAPH.read_text())["model"]["id"])


def verdict(out_dir: Path) -> tuple[bool, str]:
    from dis_serve.bench.report import read_result

    result = read_result(out_dir / "results.json")
    errors = sum(p.aiperf.errors for p in result.points)
    done = sum(p.aiperf.completed_requests for p in result.points)
    best = max(result.points, key=lambda p: p.aiperf.output_token_throughput)
    figures = (f"{done} requests, {errors} errors, {best.aiperf.output_token_throughput:.0f} "
               f"output tokens/s at {best.point.slug}")
    return done > 0 and errors == 0, figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="Where bench writes its report.")
    args = parser.parse_args()
    if (missing := missing_prerequisite()) is not None:
        print(f"gpu-check SKIP: {missing}")
        return 0
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="dis-serve-gpu-check-"))
    fetch_model()
    bench = subprocess.run([DIS_SERVE, "bench", str(GRAPH), "--scenario", str(SCENARIO),
                            "--out", str(out_dir)], check=False)
    if bench.returncode != 0 or not (out_dir / "results.json").is_file():
        print(f"gpu-check FAIL: dis-serve bench exited {bench.returncode}; logs under "
              f".dis-serve/runs/gpu-check/, report dir {out_dir}")
        return 1
    passed, figures = verdict(out_dir)
    print(f"gpu-check {'PASS' if passed else 'FAIL'}: 1 prefill + 1 decode TensorRT-LLM "
          f"workers, {figures} (report: {out_dir})")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
