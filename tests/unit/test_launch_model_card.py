"""The mocker's tokenizer-only model card, made locally."""

from __future__ import annotations

import json

from tokenizers import Tokenizer

from dis_serve.hardware.catalog import ModelArchitecture, find_known_model
from dis_serve.launch.model_card import (
    BOS,
    EOS,
    FIRST_WORD_ID,
    UNK,
    aiperf_corpus,
    corpus_words,
    write_model_card,
)

TINY = ModelArchitecture(2, 4, 2, 64, 0.01, 500, 2048)
# Room for every word of AIPerf's sonnet corpus and w<id> fill words after them.
ROOMY = ModelArchitecture(2, 4, 2, 64, 0.01, 50_005, 2048)


def _tokenizer(tmp_path, arch=TINY) -> Tokenizer:
    card = write_model_card(tmp_path / "card", arch, name="x")
    return Tokenizer.from_file(str(card / "tokenizer.json"))


def test_card_has_the_files_a_dynamo_worker_reads(tmp_path):
    card = write_model_card(tmp_path / "card", TINY, name="x")
    names = {p.name for p in card.iterdir()}
    assert {"config.json", "tokenizer.json", "tokenizer_config.json",
            "generation_config.json"} <= names


def test_every_token_id_below_vocab_size_decodes_to_text(tmp_path):
    tokenizer = _tokenizer(tmp_path)
    assert tokenizer.get_vocab_size() == TINY.vocab_size
    assert all(tokenizer.decode([i]) for i in range(FIRST_WORD_ID, TINY.vocab_size))


def test_ids_past_the_corpus_words_are_fill_words_that_round_trip(tmp_path):
    tokenizer = _tokenizer(tmp_path, ROOMY)
    fill = list(range(ROOMY.vocab_size - 3, ROOMY.vocab_size))
    assert tokenizer.decode(fill).split() == [f"w{i}" for i in fill]
    assert tokenizer.encode(tokenizer.decode(fill)).ids == fill


def test_aiperf_corpus_text_round_trips_one_id_per_word(tmp_path):
    tokenizer = _tokenizer(tmp_path, ROOMY)
    words = corpus_words(aiperf_corpus())
    text = " ".join(words[-50:])  # the rarest words: the vocabulary has room for all
    ids = tokenizer.encode(text).ids
    assert len(ids) == len(set(ids)) == 50
    assert tokenizer.decode(ids) == text


def test_words_outside_the_vocabulary_keep_their_content(tmp_path):
    tokenizer = _tokenizer(tmp_path)
    first, second = (tokenizer.encode(t).ids for t in ("def load_cfg(x):", "def save_cfg(y):"))
    assert first != second and tokenizer.token_to_id(UNK) not in first + second
    assert tokenizer.decode(first) == "def load_cfg(x):"


def test_words_with_characters_beyond_ascii_are_unk(tmp_path):
    tokenizer = _tokenizer(tmp_path)
    assert tokenizer.encode("caf\u00e9").ids == [tokenizer.token_to_id(UNK)]


def test_config_carries_the_architecture_the_mocker_sizes_kv_from(tmp_path):
    card = write_model_card(tmp_path / "card", TINY, name="x")
    config = json.loads((card / "config.json").read_text())
    assert (config["num_hidden_layers"], config["num_attention_heads"],
            config["num_key_value_heads"], config["hidden_size"], config["vocab_size"]) == (
        2, 4, 2, 64, 500)


def test_tokenizer_config_has_a_chat_template_and_special_tokens(tmp_path):
    card = write_model_card(tmp_path / "card", TINY, name="x")
    config = json.loads((card / "tokenizer_config.json").read_text())
    assert "messages" in config["chat_template"]
    assert (config["bos_token"], config["eos_token"]) == (BOS, EOS)


def test_an_unchanged_card_is_not_rewritten(tmp_path):
    card = write_model_card(tmp_path / "card", TINY, name="x")
    before = (card / "tokenizer.json").stat().st_mtime_ns
    write_model_card(tmp_path / "card", TINY, name="x")
    assert (card / "tokenizer.json").stat().st_mtime_ns == before


def test_a_different_architecture_rewrites_the_card(tmp_path):
    write_model_card(tmp_path / "card", TINY, name="x")
    bigger = ModelArchitecture(2, 4, 2, 64, 0.01, 900, 2048)
    card = write_model_card(tmp_path / "card", bigger, name="x")
    assert Tokenizer.from_file(str(card / "tokenizer.json")).get_vocab_size() == 900


def test_demo_model_card_is_the_50k_word_vocabulary():
    demo = find_known_model("dis-serve/tiny-mock")
    assert demo is not None
    assert 50_000 <= demo.architecture.vocab_size - FIRST_WORD_ID <= 50_010


def _mocker_with_model_id(model_id: str):
    from dis_serve.builtin import DEMO_TOPOLOGY
    from dis_serve.inputs.yaml_input import load_model_file
    from dis_serve.topology import Topology

    data = load_model_file(Topology, DEMO_TOPOLOGY).model_dump(mode="json")
    data["model"]["id"] = model_id
    data["model"]["architecture"] = {"layers": 2, "attention_heads": 4, "kv_heads": 2,
                                     "hidden_size": 64, "params_billion": 0.01}
    return Topology.model_validate(data)


def test_a_mocker_model_id_naming_a_local_card_is_used_as_is(tmp_path):
    from dis_serve.launch.graph import local_model_dir

    card = write_model_card(tmp_path / "mine", TINY, name="x")
    assert local_model_dir(_mocker_with_model_id(str(card))) == str(card)


def test_any_other_mocker_model_id_gets_a_generated_card(tmp_path):
    from dis_serve.launch.graph import local_model_dir

    assert local_model_dir(_mocker_with_model_id("org/not-here")) is None
    assert local_model_dir(_mocker_with_model_id(str(tmp_path))) is None  # no config.json


def test_a_card_from_an_older_recipe_is_rewritten(tmp_path):
    card = write_model_card(tmp_path / "card", TINY, name="x")
    config_path = card / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    del config["dis_serve_card_version"]
    config_path.write_text(json.dumps(config))
    (card / "tokenizer.json").write_text("{}")
    write_model_card(tmp_path / "card", TINY, name="x")
    assert Tokenizer.from_file(str(card / "tokenizer.json")).get_vocab_size() == 500
