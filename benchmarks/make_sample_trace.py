"""Write the small sample trace the trace scenarios and tests replay.

The rows have the shape of Mooncake's public traces (`timestamp` in ms, `input_length`,
`output_length`, `hash_ids`: one id per 512-token block, equal ids meaning equal content)
and of the traffic users put behind Dynamo: most requests open with one of a few shared
documents or system prompts (a chain of blocks), some share nothing, prompt lengths mix
short chat turns with long RAG contexts, arrivals are Poisson. Nothing in it comes from a
real user: it is drawn from a seeded generator, so the file is reproducible:

    python benchmarks/make_sample_trace.py            # rewrites benchmarks/traces/...
    python benchmarks/make_sample_trace.py --requests 2000 --rate 8 --out big.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

BLOCK = 512
HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "traces" / "sample-mooncake.jsonl"


def rows(requests: int, rate: float, seed: int, prefixes: int, shared: float) -> list[dict]:
    rng = random.Random(seed)
    # Each shared prefix is a chain of 1-4 blocks: a system prompt or a retrieved document.
    chains = [[1000 * (g + 1) + b for b in range(rng.randint(1, 4))] for g in range(prefixes)]
    weights = [1.0 / (g + 1) for g in range(prefixes)]  # a few prefixes carry most traffic
    next_unique = 10 ** 6
    clock_ms = 0.0
    out = []
    for _ in range(requests):
        clock_ms += rng.expovariate(rate) * 1000.0
        chain = rng.choices(chains, weights)[0] if rng.random() < shared else []
        unique_blocks = rng.choice((1, 1, 1, 2, 3))
        ids = list(chain) + list(range(next_unique, next_unique + unique_blocks))
        next_unique += unique_blocks
        last = rng.randint(64, BLOCK)
        out.append({"timestamp": int(clock_ms), "input_length": (len(ids) - 1) * BLOCK + last,
                    "output_length": rng.choice((16, 32, 32, 64)), "hash_ids": ids})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--rate", type=float, default=4.0, help="mean arrivals per second")
    parser.add_argument("--prefixes", type=int, default=6, help="distinct shared prefixes")
    parser.add_argument("--shared", type=float, default=0.75,
                        help="fraction of requests that open with a shared prefix")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(row) for row in rows(args.requests, args.rate, args.seed,
                                             args.prefixes, args.shared)]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} requests -> {args.out}")


if __name__ == "__main__":
    main()
