"""`python -m dis_serve.engines.mocker_worker ARGS`: Dynamo's mocker (`dynamo.mocker ARGS`,
the same flags), registering its token budget with the frontend.

Dynamo 1.6.1's frontend answers a request its workers cannot serve with HTTP 400 before
routing it, streaming or not, only for the limits a worker publishes in its model card's
runtime config (`dynamo.common.token_budget`, what `dynamo.trtllm` and `dynamo.vllm`
publish). Its mocker publishes none, so the frontend forwards every request and the mocker
rejects a prompt beyond `--max-model-len` itself, which the client sees as HTTP 500. This
module runs the mocker's own `main` with one addition: the budget its `--max-model-len`
implies, with both overflows rejected at the edge (the prompt alone filling the window, and
prompt + max_tokens beyond it), as Dynamo's vLLM worker publishes it.

Where dis-serve is not installed (the Kubernetes image), the engine runs `dynamo.mocker`
(engines/mocker.py: `image_module`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

BuildRuntimeConfig = Callable[[Any], tuple[int, Any]]


def publish_window(runtime_config: Any) -> None:
    """Reject at the edge whatever the mocker's context window (`--max-model-len`, its
    runtime config's `context_length`) cannot hold."""
    from dynamo.common.token_budget import TokenBudget, publish_token_budget

    if runtime_config.context_length:
        publish_token_budget(runtime_config, TokenBudget(
            combined_limit=runtime_config.context_length, reject_prompt_overflow=True,
            reject_total_overflow=True))


def with_budget(build: BuildRuntimeConfig,
                publish: Callable[[Any], None]) -> BuildRuntimeConfig:
    """The mocker's `build_runtime_config`, then `publish` on the config it built."""
    def build_runtime_config(engine_args: Any) -> tuple[int, Any]:
        block_size, runtime_config = build(engine_args)
        publish(runtime_config)
        return block_size, runtime_config

    return build_runtime_config


def run(publish: Callable[[Any], None] = publish_window) -> None:
    """Dynamo's mocker, its argv as given, with `publish` applied to each worker's runtime
    config before it registers."""
    from dynamo.mocker import main as mocker

    mocker.build_runtime_config = with_budget(mocker.build_runtime_config, publish)
    mocker.main()


if __name__ == "__main__":
    run()
