"""The model being served and the hardware it runs on."""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from ..hardware.catalog import GPUS, GpuType, ModelArchitecture, find_known_model
from .base import Strict
from .enums import KvCacheDtype, WeightDtype
from .kubernetes import Revision

# The frontend names a file after the served model name, and one path component holds 255
# bytes (NAME_MAX): measured with Dynamo 1.6.1, a 255-byte name serves, a 256-byte one never
# gets past "Model materialization failed" (File name too long).
MAX_SERVED_NAME_BYTES = 255
# model.id is a Hugging Face id or a path; Linux refuses longer paths (PATH_MAX) and longer
# path components (NAME_MAX).
MAX_MODEL_ID_BYTES = 4095
MAX_PATH_COMPONENT_BYTES = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_COMMIT_RE = re.compile(r"[0-9a-f]{40}")


class Architecture(Strict):
    """Architecture facts the memory and parallelism checks need (from the model's config.json)."""

    layers: int = Field(gt=0, description="Number of transformer layers (num_hidden_layers).")
    attention_heads: int = Field(gt=0, description="Query heads (num_attention_heads).")
    kv_heads: int = Field(gt=0, description="Key/value heads (num_key_value_heads; GQA).")
    hidden_size: int = Field(gt=0, description="Model width (hidden_size).")
    params_billion: float = Field(gt=0, description="Parameter count in billions.")
    vocab_size: int = Field(default=128256, gt=0, description="Vocabulary size.")
    max_position_embeddings: int = Field(
        default=131072, gt=0, description="Longest context the model supports.")
    head_dim: int | None = Field(
        default=None, gt=0,
        description="config.json's head_dim where it is not hidden_size / attention_heads.")

    def to_catalog(self) -> ModelArchitecture:
        fields = self.model_dump()
        return ModelArchitecture(explicit_head_dim=fields.pop("head_dim"), **fields)


class Model(Strict):
    """The model being served."""

    id: str = Field(
        min_length=1,
        description="Hugging Face id or local path passed to the workers. For the mocker, a "
                    "local model card directory, or any id: dis-serve then makes a "
                    "tokenizer-only card locally and never reaches a hub.")
    served_name: str | None = Field(
        default=None, description="Name clients use in the OpenAI API (default: the id).")
    architecture: Architecture | None = Field(
        default=None,
        description="Architecture facts; optional for catalog models (Llama-3.1-70B/8B, "
                    "Qwen3-32B), required otherwise.")
    dtype: WeightDtype = Field(
        default=WeightDtype.BF16, description="Weight format: bf16 | fp8 | int8 | awq.")
    kv_cache_dtype: KvCacheDtype = Field(
        default=KvCacheDtype.BF16, description="KV-cache element format: bf16 | fp8.")
    prequantized: bool = Field(
        default=False,
        description="model.id is a checkpoint already quantized to model.dtype (e.g. your own "
                    "Model Optimizer export). Needed for fp8/int8/awq unless model.id is a "
                    "catalog checkpoint of that format; TRT-LLM never quantizes at load time.")
    max_input_tokens: int = Field(
        default=4096, gt=0, description="Longest prompt the graph must accept, in tokens.")
    max_output_tokens: int = Field(
        default=1024, gt=0, description="Longest completion the graph must produce, in tokens.")
    revision: Revision = Field(
        default="main",
        description="Hugging Face revision of model.id that gets downloaded (the Kubernetes "
                    "download Job). A commit hash pins the weights; `main` is whatever the "
                    "repository holds when the download runs (validate warns).")
    path: str | None = Field(
        default=None, min_length=1,
        description="Checkpoint directory on storage every node shares (hosts and Slurm): "
                    "the workers load it as --model, inside a container it is mounted at "
                    "the same path, and each node checks config.json and the weights are "
                    "there before its workers start. Default: model.id through the Hugging "
                    "Face cache.")

    @model_validator(mode="after")
    def _check_names(self) -> Model:
        for key, value in (("model.id", self.id), ("model.served_name", self.served_name)):
            if value is not None and (match := _CONTROL.search(value)):
                raise ValueError(f"{key} {value[:60]!r} holds the control character "
                                 f"{match.group()!r}; remove it (names reach files, argv and "
                                 "logs)")
        too_long = next((part for part in self.id.split("/")
                         if len(part.encode()) > MAX_PATH_COMPONENT_BYTES), None)
        if len(self.id.encode()) > MAX_MODEL_ID_BYTES or too_long is not None:
            raise ValueError(f"model.id is {len(self.id.encode())} bytes; the filesystem takes "
                             f"at most {MAX_MODEL_ID_BYTES} bytes in a path and "
                             f"{MAX_PATH_COMPONENT_BYTES} between slashes; shorten it")
        if len(self.name.encode()) > MAX_SERVED_NAME_BYTES:
            key = "model.served_name" if self.served_name else "model.id"
            raise ValueError(f"{key} gives a served model name of {len(self.name.encode())} "
                             f"bytes; Dynamo names files after it, which allows at most "
                             f"{MAX_SERVED_NAME_BYTES}; set a shorter model.served_name")
        return self

    @property
    def name(self) -> str:
        return self.served_name or self.id

    @property
    def pinned_revision(self) -> str | None:
        """`revision` when it is a commit hash (the weights it names cannot change)."""
        return self.revision if _COMMIT_RE.fullmatch(self.revision) else None

    @property
    def max_seq_len(self) -> int:
        return self.max_input_tokens + self.max_output_tokens

    def resolved_architecture(self) -> ModelArchitecture:
        if self.architecture is not None:
            return self.architecture.to_catalog()
        known = find_known_model(self.id)
        if known is None:  # guarded by Topology's validator; kept for direct callers
            raise ValueError(f"model.architecture is required for {self.id!r}")
        return known.architecture


class Hardware(Strict):
    """The GPUs the graph runs on."""

    gpu: GpuType = Field(
        default=GpuType.H100_SXM,
        description="GPU type from the catalog: " + ", ".join(g.value for g in GpuType) + ".")
    gpus_per_node: int = Field(default=8, ge=1, le=16, description="GPUs in each node.")
    nodes: int = Field(default=1, ge=1, le=1024, description="Number of nodes.")
    price_per_gpu_hour: float | None = Field(
        default=None, gt=0, description="USD per GPU-hour (default: the catalog's list price).")

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def hourly_price(self) -> float:
        return self.price_per_gpu_hour or GPUS[self.gpu].price_per_hour_usd

