"""`aisimulate_core.sdk` as Dynamo 1.6.1's planner uses it, on AIConfigurator's core.

AISimulate (NVIDIA's `aisimulate` / `aisimulate-core`, not on PyPI: its `aisimulate` 0.13.0
there is a stub that downloads from NVIDIA's own index) is AIConfigurator renamed. The
planner imports two names from it (`dynamo/planner/core/perf_model/ais_adapter.py`,
`engine_query.py`):

- `ForwardPassPerfModelConfig`: the role's estimator request (model, system, backend,
  worker_type, estimation_mode, tp, pp, attention_dp, kv_block_size, nextn, speculation,
  estimator_config), which the planner builds, `asdict`s, and extends with the estimator
  controls `from_legacy_engine_config` derives from AIConfigurator's engine config;
- `RustForwardPassPerfModel.best_available(config)`: the forward-pass model itself.

aiconfigurator-core 0.12.0 ships that model under the same name
(`aiconfigurator_core.sdk.rust_engine_step.RustForwardPassPerfModel`, "the public class name
and method signatures match ... so callers (the Dynamo planner / mocker) are unaffected"),
taking the engine config and the estimator options as two arguments where AISimulate takes
one request. This module maps the one onto the other and adds nothing: estimates, tuning
and diagnostics are AIConfigurator's. `estimation_mode: fpm_regression` (the planner's
choice when no `ais_perf_model` is configured) is the regression on live forward-pass
metrics alone, which never looks a model up; `native` and `auto` use AIConfigurator's
measured database for the system, model and backend named.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from aiconfigurator_core.sdk.rust_engine_step import RustForwardPassPerfModel as _AicModel

__all__ = ["ForwardPassPerfModelConfig", "RustForwardPassPerfModel"]

# Where from_legacy_engine_config keeps AIConfigurator's estimator options (max_num_tokens,
# max_batch_size, max_kv_tokens, observation counts) inside estimator_config.
OPTIONS_KEY = "options"


@dataclass
class ForwardPassPerfModelConfig:
    """One deployment role's forward-pass estimator request."""

    model: str
    system: str
    backend: str
    worker_type: str
    estimation_mode: str = "auto"
    tp: int = 1
    pp: int = 1
    attention_dp: int = 1
    kv_block_size: int | None = None
    nextn: int = 0
    speculation: dict[str, Any] | None = None
    estimator_config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_legacy_engine_config(cls, engine_config: dict[str, Any], worker_type: str,
                                  options: dict[str, Any] | None = None
                                  ) -> ForwardPassPerfModelConfig:
        """The request for AIConfigurator's engine config (`schema_version`, `model_name`,
        `system_name`, `backend`, `tp_size`, `pp_size`) and estimator options."""
        return cls(model=engine_config["model_name"], system=engine_config["system_name"],
                   backend=engine_config["backend"], worker_type=worker_type,
                   tp=int(engine_config.get("tp_size", 1)),
                   pp=int(engine_config.get("pp_size", 1)),
                   estimator_config={OPTIONS_KEY: dict(options or {})})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def engine_config(self) -> dict[str, Any]:
        """AIConfigurator's engine config for this request."""
        return {"schema_version": 1, "model_name": self.model, "system_name": self.system,
                "backend": self.backend, "tp_size": self.tp, "pp_size": self.pp}


class RustForwardPassPerfModel:
    """AIConfigurator's forward-pass model behind AISimulate's one-request constructor."""

    def __init__(self, model: _AicModel) -> None:
        self._model = model

    @classmethod
    def best_available(cls, config: dict[str, Any]) -> RustForwardPassPerfModel:
        known = ForwardPassPerfModelConfig.__dataclass_fields__
        request = ForwardPassPerfModelConfig(**{k: v for k, v in config.items() if k in known})
        options = request.estimator_config.get(OPTIONS_KEY) or None
        if request.estimation_mode == "fpm_regression":
            return cls(_AicModel.from_regression(options))
        if request.estimation_mode == "native":
            return cls(_AicModel.from_native(request.engine_config(), options))
        return cls(_AicModel.best_available(request.engine_config(), options))

    def estimate_forward_pass_time_ms(self, metrics: dict[str, Any] | list[dict[str, Any]]
                                      ) -> float | None:
        return self._model.estimate_forward_pass_time_ms(metrics)

    def tune_with_fpms(self, iterations: dict[str, Any] | list[Any]) -> None:
        self._model.tune_with_fpms(iterations)

    def diagnostics(self) -> dict[str, Any]:
        return self._model.diagnostics()

    def min_correction_factor(self) -> float | None:
        return self._model.get_min_correction_factor()

    def max_correction_factor(self) -> float | None:
        return self._model.get_max_correction_factor()

    def avg_correction_factor(self) -> float | None:
        return self._model.get_avg_correction_factor()
