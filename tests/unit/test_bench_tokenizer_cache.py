"""The tokenizer directory AIPerf sees as a hub-cache entry."""

from __future__ import annotations

import os

from dis_serve.bench.tokenizer_cache import hub_cache_view


def test_an_unchanged_directory_keeps_its_repo_id(tmp_path):
    (tmp_path / "card").mkdir()
    (tmp_path / "card" / "tokenizer.json").write_text("{}")
    first = hub_cache_view(tmp_path / "card", tmp_path / "cache")
    assert hub_cache_view(tmp_path / "card", tmp_path / "cache").repo_id == first.repo_id


def test_a_rewritten_tokenizer_gets_a_new_repo_id_so_aiperf_drops_its_cached_prompts(
        tmp_path):
    tokenizer = tmp_path / "card" / "tokenizer.json"
    tokenizer.parent.mkdir()
    tokenizer.write_text("{}")
    before = hub_cache_view(tokenizer.parent, tmp_path / "cache")
    tokenizer.write_text('{"model": {}}')
    os.utime(tokenizer, ns=(1, 1))
    after = hub_cache_view(tokenizer.parent, tmp_path / "cache")
    assert after.repo_id != before.repo_id
    assert (tmp_path / "cache" / f"models--{after.repo_id.replace('/', '--')}").is_dir()
