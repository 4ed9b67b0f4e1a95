"""The offline local model (loaded once for this module): vectors, truncation, tokenizer,
laziness, and paraphrase search with the default settings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clawd.memory.chunk_parts import segment_chunks
from clawd.memory.chunker import chunk_text
from clawd.memory.local import DATA_DIR, DEFAULT_LOCAL_MODEL, LocalEmbedder
from clawd.storage.files.memory import open_file_index

from memory_fakes import settings, write


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


def test_vectors_are_384_d_unit_length_and_deterministic(local):
    docs = local.embed_documents(["The gateway runs on the Mac Studio.", "Buy oat milk."])
    query = local.embed_query("The gateway runs on the Mac Studio.")
    assert local.dims == 384 and local.model == DEFAULT_LOCAL_MODEL
    assert np.linalg.norm(docs[0]) == pytest.approx(1.0, abs=1e-5)
    assert np.allclose(query, docs[0], atol=1e-5)
    assert float(docs[0] @ docs[1]) < 0.3


def test_input_is_truncated_at_256_tokens(local):
    head = " ".join(["memory"] * 300)
    a = local.embed_query(head + " zebra giraffe")
    b = local.embed_query(head + " quantum physics")
    assert np.allclose(a, b, atol=1e-6)
    assert len(local.tokenize([head])[0].ids) == 300  # tokenizing itself is not truncated
    # Token ids are framed and truncated as text is.
    framed = local.embed_tokens([local.tokenize([head + " zebra giraffe"])[0].ids])[0]
    assert np.allclose(framed, a, atol=1e-6)


def test_shipped_tokenizer_is_bert_uncased_wordpiece(local):
    assert (DATA_DIR / "tokenizer.json").is_file()
    assert (DATA_DIR / "NOTICE.md").is_file()
    local.tokenize(["warm up"])
    tokenizer = local._tokenizer
    assert tokenizer.get_vocab_size() == 30522
    assert tokenizer.encode("Hello world").ids == [101, 7592, 2088, 102]
    assert tokenizer.token_to_id("[PAD]") == 0


def test_segments_are_embedded_from_their_token_ids_as_from_their_text(local):
    # Notes with headings, punctuation, accents, CJK, an emoji and a line longer than a
    # segment: the ids a segment carries are the model's tokens of its text.
    text = ("# Trip to Zürich — März\n\n- Flight LX-318 at 07:45, seat 12C (aisle).\n"
            "- Hotel: Café-Bar «Odeon»; 东京的会议改到下周三 🙂\n"
            "- " + " ".join(f"item{i}, done;" for i in range(90)) + "\n\n"
            "## Packing\n\n  * passport\n  * charger\n")
    chunks = chunk_text(text, 400, 80)
    segmented = segment_chunks(chunks, 96, local.tokenize)
    segments = [s for chunk in segmented for s in chunk]
    assert len(segments) > len(chunks)
    for segment in segments:
        assert segment.ids == local.tokenize([segment.text])[0].ids, segment.text
    by_ids = local.embed_tokens([s.ids for s in segments])
    by_text = local.embed_documents([s.text for s in segments])
    assert np.allclose(np.stack(by_ids), np.stack(by_text), atol=1e-5)


@pytest.mark.slow  # starts a fresh interpreter
def test_importing_memory_loads_no_model_or_sdk():
    code = ("import sys, clawd.memory, clawd.memory.index, clawd.memory.local, "
            "clawd.memory.embeddings, clawd.tools.memory\n"
            "from clawd.memory.local import LocalEmbedder\n"
            "LocalEmbedder()\n"
            "print([m for m in ('onnxruntime', 'openai', 'tokenizers', 'numpy') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout.replace("'", '"')) == []


NOTES = {
    "memory/pets.md": "# Pets\n\n- Milo the cat needs his thyroid pills every morning.\n",
    "memory/health.md": "# Health\n\n- Dentist appointment moved to Thursday at 3pm.\n",
    "memory/food.md": "# Food\n\n- Anna prefers tea over coffee and hates loud restaurants.\n",
    "MEMORY.md": "# Memory\n\n- Deploys go out on Tuesdays; the rollback plan is in the runbook.\n",
}


def test_paraphrase_without_shared_words_comes_back_with_defaults(local, tmp_path: Path):
    ws = tmp_path / "ws"
    for rel, text in NOTES.items():
        write(ws, rel, text)
    index = open_file_index("main", ws, settings(sync={"watch": False}), tmp_path / "state",
                            embedder=local, env={})
    index.sync()
    for query, expected in [("medication schedule for the pet", "memory/pets.md"),
                            ("when is my tooth doctor visit", "memory/health.md"),
                            ("what drinks does she like", "memory/food.md")]:
        result = index.search(query)  # default minScore 0.35, weights 0.7 / 0.3
        assert result["results"], query
        assert result["results"][0]["path"] == expected, (query, result)
        assert result["provider"] == "local" and result["model"] == DEFAULT_LOCAL_MODEL
    assert index.search("thyroid")["results"][0]["path"] == "memory/pets.md"
    assert index.status()["vector"]["mode"] == "vec0"
    index.close()


def test_model_and_tokenizer_are_checked_by_sha256_before_loading(monkeypatch, tmp_path):
    from clawd.memory import local as local_module
    from clawd.memory.embeddings import EmbeddingError

    spec = local_module.PACKAGED_MODELS[DEFAULT_LOCAL_MODEL]
    monkeypatch.setitem(local_module.PACKAGED_MODELS, DEFAULT_LOCAL_MODEL,
                        local_module.PackagedModel(spec.name, spec.distribution,
                                                   spec.relative_path, "0" * 64))
    with pytest.raises(EmbeddingError, match="does not match its known SHA-256"):
        LocalEmbedder().embed_query("hello")
    monkeypatch.undo()
    monkeypatch.setattr(local_module, "SHIPPED_TOKENIZER_SHA256", "f" * 64)
    with pytest.raises(EmbeddingError, match="shipped tokenizer .* does not match"):
        LocalEmbedder().tokenize(["hello"])
    unknown = tmp_path / "model.onnx"
    unknown.write_bytes(b"onnx")
    with pytest.raises(EmbeddingError, match="no known SHA-256"):
        local_module.verify(unknown, None, "local model x")


def test_a_tampered_model_leaves_search_keyword_only(monkeypatch, tmp_path):
    from clawd.memory import local as local_module

    monkeypatch.setattr(local_module, "SHIPPED_TOKENIZER_SHA256", "f" * 64)
    write(tmp_path / "ws", "MEMORY.md", "# Memory\n\n- the gateway runs on the Mac Studio\n")
    index = open_file_index("main", tmp_path / "ws",
                            settings(sync={"watch": False}, provider="local", fallback="none"),
                            tmp_path / "state", env={})
    index.sync()
    result = index.search("gateway")
    assert result["mode"] == "keyword" and result["results"][0]["path"] == "MEMORY.md"
    assert "SHA-256" in index.status()["embeddingError"]
    index.close()
