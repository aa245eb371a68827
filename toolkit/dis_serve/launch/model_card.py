"""A tokenizer-only model card for the mocker, made locally so nothing reaches a model hub.

The mocker never loads weights: it needs a tokenizer to turn prompts into token ids and the
ids it samples back into text, and a `config.json` whose sizes give the KV bytes per token.
The tokenizer covers every id below `vocab_size` with a word: the mocker samples output ids
across the vocabulary, and a small (e.g. 2,000-token BPE) vocabulary decodes most of them to
nothing, which clients then count as failed requests.

Prompts must keep their content, too: the prefix cache and the KV router compare token ids,
so text that tokenizes to one repeated id makes every prompt look cached. The vocabulary
therefore holds, most frequent first, the words of AIPerf's own prompt corpus (the sonnets
its synthetic prompts and trace hash-id blocks are cut from), so those round-trip one id per
word; any other word of printable ASCII falls back to WordPiece character pieces; `w<id>`
words fill the rest. Only words with other characters become `<unk>`.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections import Counter
from pathlib import Path

from ..files.atomic_file import write_atomic
from ..hardware.catalog import ModelArchitecture

UNK, BOS, EOS = "<unk>", "<|bos|>", "<|eos|>"
SPECIAL_TOKENS = (UNK, BOS, EOS)
FIRST_WORD_ID = len(SPECIAL_TOKENS)
BOS_ID, EOS_ID = SPECIAL_TOKENS.index(BOS), SPECIAL_TOKENS.index(EOS)

# WordPiece marks a piece that continues a word; a word outside the vocabulary becomes its
# first character plus continuation pieces, so any printable-ASCII text keeps its content.
CONTINUATION = "##"
FALLBACK_CHARS = tuple(chr(c) for c in range(ord("!"), ord("~") + 1))
FALLBACK_PIECES = FALLBACK_CHARS + tuple(CONTINUATION + c for c in FALLBACK_CHARS)
# Where AIPerf keeps the text its sonnet prompts are sampled from (aiperf 0.13).
AIPERF_CORPUS = ("dataset", "generator", "assets", "shakespeare.txt")
# Bumped when the vocabulary's recipe changes, so cards made by an older one are rewritten.
CARD_VERSION = 2
_FILL_WORD = re.compile(r"w[0-9]+")

# Roles in a plain "role: text" layout; the mocker only needs the prompt to tokenize.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ message['role'] }} {{ message['content'] }} "
    "{% endfor %}{% if add_generation_prompt %}assistant {% endif %}"
)

CARD_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json",
              "generation_config.json")


def word(token_id: int) -> str:
    """The fill word for an id no special token, piece or corpus word took (`w<id>`)."""
    return f"w{token_id}"


def aiperf_corpus() -> Path | None:
    """AIPerf's sonnet corpus in the installed package, or None without AIPerf."""
    spec = importlib.util.find_spec("aiperf")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root).joinpath(*AIPERF_CORPUS)
        if path.is_file():
            return path
    return None


def corpus_words(corpus: Path | None) -> list[str]:
    """The corpus's whitespace-separated words, most frequent first (ties: first seen)."""
    if corpus is None:
        return []
    counts = Counter(corpus.read_text(encoding="utf-8").split())
    # A corpus word spelled like a fill word or a continuation piece would take its id.
    return [w for w, _ in counts.most_common()
            if not (_FILL_WORD.fullmatch(w) or w.startswith(CONTINUATION))]


def vocabulary(vocab_size: int, words: list[str]) -> dict[str, int]:
    """Specials, fallback pieces, then corpus words while they fit; `w<id>` for the rest."""
    tokens = list(dict.fromkeys([*SPECIAL_TOKENS, *FALLBACK_PIECES, *words]))[:vocab_size]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    vocab.update({word(i): i for i in range(len(tokens), vocab_size)})
    return vocab


def _tokenizer_json(vocab: dict[str, int]) -> dict:
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
        # Joins words with spaces and glues continuation pieces back onto their word.
        "decoder": {"type": "WordPiece", "prefix": CONTINUATION, "cleanup": False},
        "model": {"type": "WordPiece", "vocab": vocab, "unk_token": UNK,
                  "continuing_subword_prefix": CONTINUATION,
                  "max_input_chars_per_word": 100},
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
        "dis_serve_card_version": CARD_VERSION,
    }


def write_model_card(directory: Path, arch: ModelArchitecture, *, name: str) -> Path:
    """Write the card into `directory` (created if needed) and return it.

    An existing complete card with the same config and card version is kept: the tokenizer
    for a 128k vocabulary is a few megabytes, and rewriting it on every `up` is wasted time.
    """
    directory.mkdir(parents=True, exist_ok=True)
    config = _config_json(arch, name)
    tokenizer_config = _tokenizer_config(arch.max_position_embeddings)
    if (all((directory / f).is_file() for f in CARD_FILES)
            and _read_json(directory / "config.json") == config
            and _read_json(directory / "tokenizer_config.json") == tokenizer_config):
        return directory
    if arch.vocab_size <= FIRST_WORD_ID:
        raise ValueError(f"vocab_size {arch.vocab_size} leaves no room for words")
    files = {
        "tokenizer.json": _tokenizer_json(
            vocabulary(arch.vocab_size, corpus_words(aiperf_corpus()))),
        "tokenizer_config.json": tokenizer_config,
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
