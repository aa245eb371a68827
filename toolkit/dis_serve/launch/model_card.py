"""A tokenizer-only model card for the mocker, made locally so nothing reaches a model hub.

The mocker never loads weights: it needs a tokenizer to turn prompts into token ids and the
ids it samples back into text, and a `config.json` whose sizes give the KV bytes per token.
The tokenizer is a word-level vocabulary covering every id below `vocab_size`: the mocker
samples output ids across the vocabulary, and a small (e.g. 2,000-token BPE) vocabulary
decodes most of them to nothing, which clients then count as failed requests.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..atomic_file import write_atomic
from ..catalog import ModelArchitecture

UNK, BOS, EOS = "<unk>", "<|bos|>", "<|eos|>"
SPECIAL_TOKENS = (UNK, BOS, EOS)
FIRST_WORD_ID = len(SPECIAL_TOKENS)
BOS_ID, EOS_ID = SPECIAL_TOKENS.index(BOS), SPECIAL_TOKENS.index(EOS)

# Roles in a plain "role: text" layout; the mocker only needs the prompt to tokenize.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ message['role'] }} {{ message['content'] }} "
    "{% endfor %}{% if add_generation_prompt %}assistant {% endif %}"
)

CARD_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json",
              "generation_config.json")


def word(token_id: int) -> str:
    """The vocabulary word for a non-special token id (`w3`, `w4`, ...)."""
    return f"w{token_id}"


def _tokenizer_json(vocab_size: int) -> dict:
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    vocab.update({word(i): i for i in range(FIRST_WORD_ID, vocab_size)})
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": tok, "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True}
            for i, tok in enumerate(SPECIAL_TOKENS)
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        # WordPiece's decoder joins words with spaces (and merges "##" pieces, which never occur).
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": False},
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": UNK},
    }


def _config_json(arch: ModelArchitecture, model_type_name: str) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "_name_or_path": model_type_name,
        "vocab_size": arch.vocab_size,
        "hidden_size": arch.hidden_size,
        "num_hidden_layers": arch.layers,
        "num_attention_heads": arch.attention_heads,
        "num_key_value_heads": arch.kv_heads,
        "intermediate_size": arch.hidden_size * 4,
        "max_position_embeddings": arch.max_position_embeddings,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "torch_dtype": "bfloat16",
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "tie_word_embeddings": False,
    }


def _tokenizer_config(max_len: int) -> dict:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "unk_token": UNK,
        "pad_token": EOS,
        "model_max_length": max_len,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }


def write_model_card(directory: Path, arch: ModelArchitecture, *, name: str) -> Path:
    """Write the card into `directory` (created if needed) and return it.

    An existing complete card with the same config is kept: the tokenizer for a 128k
    vocabulary is a few megabytes, and rewriting it on every `up` is wasted time.
    """
    directory.mkdir(parents=True, exist_ok=True)
    config = _config_json(arch, name)
    config_path = directory / "config.json"
    if (all((directory / f).is_file() for f in CARD_FILES)
            and _read_json(config_path) == config):
        return directory
    if arch.vocab_size <= FIRST_WORD_ID:
        raise ValueError(f"vocab_size {arch.vocab_size} leaves no room for words")
    files = {
        "tokenizer.json": _tokenizer_json(arch.vocab_size),
        "tokenizer_config.json": _tokenizer_config(arch.max_position_embeddings),
        "generation_config.json": {"bos_token_id": BOS_ID,
                                   "eos_token_id": EOS_ID},
        # Last: its presence with matching content marks the card complete.
        "config.json": config,
    }
    for filename, content in files.items():
        write_atomic(directory / filename,
                     json.dumps(content, indent=None if filename == "tokenizer.json" else 2))
    return directory


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
