"""A local tokenizer directory presented to AIPerf as a Hugging Face hub cache entry.

AIPerf 0.13 loads the tokenizer again inside the worker processes that synthesize trace
prompts (hash-id blocks) and forces those workers offline; offline, it looks the name up in
the hub cache only, so a plain directory path fails there ("Repo id must be in the form
...") and the whole run stops. Giving AIPerf a repository id whose snapshot is the local
directory (symlinked, nothing copied) works the same in the main process and in the
workers, with no network either way.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

# Not a real hub repository: a name that can only ever resolve to this cache.
REPO_OWNER = "dis-serve-local"


@dataclass(frozen=True)
class HubCacheView:
    repo_id: str
    cache_dir: Path

    @property
    def env(self) -> dict[str, str]:
        """What AIPerf's environment needs to find the tokenizer offline."""
        return {"HF_HUB_CACHE": str(self.cache_dir), "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1"}


def hub_cache_view(model_dir: Path, cache_dir: Path) -> HubCacheView:
    """The hub-cache entry for `model_dir` under `cache_dir` (created or refreshed)."""
    model_dir = model_dir.resolve()
    digest = hashlib.sha256(str(model_dir).encode()).hexdigest()[:16]
    name = f"card-{digest}"
    entry = cache_dir / f"models--{REPO_OWNER}--{name}"
    snapshot = entry / "snapshots" / digest
    snapshot.mkdir(parents=True, exist_ok=True)
    for stale in snapshot.iterdir():
        if stale.is_symlink() and not stale.exists():
            stale.unlink()
    for source in model_dir.iterdir():
        if source.is_file():
            link = snapshot / source.name
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(source)
    (entry / "refs").mkdir(exist_ok=True)
    (entry / "refs" / "main").write_text(digest, encoding="utf-8")
    return HubCacheView(repo_id=f"{REPO_OWNER}/{name}", cache_dir=cache_dir)
