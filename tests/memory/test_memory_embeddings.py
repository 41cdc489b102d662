"""The offline embedding function: the bundled all-MiniLM-L6-v2, normalised, batched, loaded once."""

from __future__ import annotations

import numpy as np
from chromadb.utils.embedding_functions import config_to_embedding_function, known_embedding_functions

from lamarck.memory.embedding_stats import EmbeddingCost
from lamarck.memory.embeddings import DIMENSIONS, EMBEDDING_NAME, MiniLMEmbedding, bundled_model_path, load_model


def test_embeds_normalised_vectors_in_batches() -> None:
    texts = [f"lesson number {i}: carry the one when adding" for i in range(7)] + ["escape regex dots"]
    batched = MiniLMEmbedding(batch_size=3).embed(texts)
    assert batched.shape == (8, DIMENSIONS) and batched.dtype == np.float32
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    single = MiniLMEmbedding(batch_size=64).embed(texts[-1:])
    assert np.allclose(single[0], batched[-1], atol=1e-5)
    as_chroma = MiniLMEmbedding()(["escape regex dots"])
    assert len(as_chroma) == 1 and np.allclose(as_chroma[0], single[0], atol=1e-5)
    assert MiniLMEmbedding().embed([]).shape == (0, DIMENSIONS)


def test_similar_texts_are_closer() -> None:
    a, b, c = MiniLMEmbedding().embed(
        ["Add the carry to the next column.", "Carry the one into the next digit when adding.", "Store dates in UTC."]
    )
    assert float(a @ b) > float(a @ c) + 0.2


def test_model_is_the_bundled_one_and_loaded_once() -> None:
    assert (bundled_model_path() / "model.safetensors").is_file()
    assert load_model() is load_model(bundled_model_path())


def test_registered_with_chroma_and_rebuilds_from_config() -> None:
    ef = MiniLMEmbedding(batch_size=16)
    assert known_embedding_functions[EMBEDDING_NAME] is MiniLMEmbedding
    assert not ef.is_legacy() and ef.default_space() == "cosine"
    rebuilt = config_to_embedding_function({"name": EMBEDDING_NAME, "config": ef.get_config()})
    assert isinstance(rebuilt, MiniLMEmbedding) and rebuilt.batch_size == 16 and rebuilt.model_path is None


def test_repeated_texts_come_from_the_cache_and_are_counted() -> None:
    ef = MiniLMEmbedding(cache_size=8)
    texts = ["carry the one", "escape the dot", "carry the one"]
    first = ef.embed(texts)
    cost = ef.stats.snapshot()
    assert (cost.calls, cost.texts, cost.cache_hits) == (1, 2, 1) and cost.seconds > 0
    again = ef.embed(["escape the dot", "carry the one"])
    assert np.array_equal(again, first[[1, 0]])
    assert ef.stats.snapshot() - cost == EmbeddingCost(calls=0, texts=0, cache_hits=2, seconds=0.0)
    again[0] += 1.0  # a caller's array is its own: the cached vector is unchanged
    assert np.array_equal(ef.embed(["escape the dot"])[0], first[1])


def test_the_cache_forgets_the_least_recently_used() -> None:
    ef = MiniLMEmbedding(cache_size=2)
    ef.embed(["one", "two"])
    ef.embed(["one"])  # "two" is now the least recently used
    ef.embed(["three"])
    before = ef.stats.snapshot()
    ef.embed(["one", "three"])
    assert (ef.stats.snapshot() - before).texts == 0
    ef.embed(["two"])
    assert (ef.stats.snapshot() - before).texts == 1 and len(ef.cache) == 2
    uncached = MiniLMEmbedding(cache_size=0)
    uncached.embed(["one"])
    uncached.embed(["one"])
    assert uncached.stats.snapshot().texts == 2 and len(uncached.cache) == 0
