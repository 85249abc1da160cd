"""The sentence embedder: bundled MiniLM on CPU, shapes, normalization, batching, errors."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from backend.errors import Cancelled, ModelError, ParameterError
from backend.models.embedder import (
    embedder_name,
    load_embedder,
    loaded_embedder,
    resolve_embedder_spec,
    weights_fingerprint,
)
from backend.progress import CancelToken, Progress
from backend.tokenizers import minilm_dir

SENTENCES = [
    "The cat sat on the mat.",
    "A cat was sitting on a rug.",
    "Stock markets fell sharply after the central bank raised interest rates.",
    "Chunking splits a long document into passages for retrieval.",
    "Retrieval-augmented generation looks up passages before answering.",
    "Ein kurzer deutscher Satz über das Wetter.",
    "北京是中国的首都。",
]


@pytest.fixture(scope="module")
def embedder():
    return load_embedder(device="cpu")


def test_bundled_model_info(embedder):
    info = embedder.info
    assert info.name == "all-MiniLM-L6-v2"
    assert info.kind == "embedder"
    assert info.device == "cpu" and info.dtype == "float32"
    assert 20_000_000 < info.parameters < 25_000_000
    assert info.context_length == 256
    assert len(info.fingerprint) == 64
    assert embedder.dimension == 384
    assert Path(info.source) == minilm_dir()


def test_loaded_once_per_process(embedder):
    assert load_embedder("minilm", device="cpu") is embedder
    assert load_embedder(" MiniLM ", device="cpu") is embedder


def test_loaded_embedder_asks_the_process_cache_and_never_loads(embedder, monkeypatch):
    import backend.models.embedder as embedder_module

    monkeypatch.delenv("CHUNKLAB_EMBEDDER", raising=False)
    assert loaded_embedder() == loaded_embedder("minilm") == embedder.info
    assert loaded_embedder("./no-such-embedder") is None
    monkeypatch.setattr(embedder_module, "_loaded", {})
    assert loaded_embedder() is None and embedder_module._loaded == {}


def test_embedder_name_without_loading(tmp_path, monkeypatch):
    monkeypatch.delenv("CHUNKLAB_EMBEDDER", raising=False)
    (tmp_path / "my-embedder").mkdir()
    assert [embedder_name(s) for s in (None, "minilm", str(tmp_path / "my-embedder"), "org/model", "./missing")] == [
        "all-MiniLM-L6-v2", "all-MiniLM-L6-v2", "my-embedder", "org/model", "./missing",
    ]


def test_shape_dtype_and_unit_norm(embedder):
    vecs = embedder.embed(SENTENCES)
    assert vecs.shape == (len(SENTENCES), 384)
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


def test_similar_sentences_are_closer_than_unrelated_ones(embedder):
    cat, cat2, stocks, chunking, rag = embedder.embed(SENTENCES[:5])
    assert cat @ cat2 > 0.5
    assert cat @ cat2 > cat @ stocks + 0.3
    assert chunking @ rag > chunking @ cat


def test_deterministic_and_order_preserving(embedder):
    a = embedder.embed(SENTENCES)
    b = embedder.embed(SENTENCES)
    np.testing.assert_array_equal(a, b)
    reversed_ = embedder.embed(SENTENCES[::-1])
    np.testing.assert_allclose(reversed_[::-1], a, atol=1e-5)


@pytest.mark.parametrize("batch_size", [1, 2, 3, 64])
def test_batch_size_does_not_change_results(embedder, batch_size):
    reference = embedder.embed(SENTENCES, batch_size=len(SENTENCES))
    np.testing.assert_allclose(embedder.embed(SENTENCES, batch_size=batch_size), reference, atol=1e-5)


def test_empty_input_and_empty_strings(embedder):
    assert embedder.embed([]).shape == (0, 384)
    assert embedder.embed(()).dtype == np.float32
    vec = embedder.embed([""])
    assert vec.shape == (1, 384) and np.isfinite(vec).all()


def test_bad_arguments_are_parameter_errors(embedder):
    with pytest.raises(ParameterError, match="not a single string"):
        embedder.embed("one text")
    with pytest.raises(ParameterError, match=r"texts\[1\] is a int"):
        embedder.embed(["ok", 3])
    with pytest.raises(ParameterError, match="batch_size"):
        embedder.embed(["ok"], batch_size=0)


def test_progress_is_reported_and_cancel_stops(embedder):
    calls = []
    embedder.embed(SENTENCES, batch_size=2, progress=Progress(counts=lambda done, total: calls.append((done, total))))
    assert calls and calls[-1] == (len(SENTENCES), len(SENTENCES))
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        embedder.embed(SENTENCES, batch_size=2, progress=Progress(cancel=token))


def test_plain_transformers_folder_uses_mean_pooling(tmp_path, embedder):
    # The bundled folder without its sentence-transformers files: a plain BERT checkpoint.
    # MiniLM's own pipeline is mean pooling + normalization, so the vectors are the same.
    src = minilm_dir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "vocab.txt", "special_tokens_map.json"):
        (tmp_path / name).symlink_to(src / name)
    plain = load_embedder(str(tmp_path), device="cpu")
    assert plain is not embedder
    assert plain.info.name == tmp_path.name
    np.testing.assert_allclose(plain.embed(SENTENCES[:4]), embedder.embed(SENTENCES[:4]), atol=1e-5)


def test_fingerprint_follows_the_weights(tmp_path):
    src = minilm_dir()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for folder in (a, b):
        (folder / "config.json").symlink_to(src / "config.json")
        (folder / "model.safetensors").write_bytes(b"weights v1")
    assert weights_fingerprint(a) == weights_fingerprint(b)  # the folder's name does not count
    (b / "model.safetensors").write_bytes(b"weights v2")
    assert weights_fingerprint(a) != weights_fingerprint(b)
    (a / "model.safetensors").unlink()
    with pytest.raises(ModelError, match="no weight file"):
        weights_fingerprint(a)


def test_missing_folder_is_a_model_error(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        load_embedder(str(tmp_path / "nope"), device="cpu")
    with pytest.raises(ModelError, match="does not exist"):
        load_embedder("./no/such/model", device="cpu")


def test_file_or_empty_folder_is_a_model_error(tmp_path):
    f = tmp_path / "model.bin"
    f.write_bytes(b"x")
    with pytest.raises(ModelError, match="is a file"):
        load_embedder(str(f), device="cpu")
    with pytest.raises(ModelError, match="not a model folder"):
        load_embedder(str(tmp_path), device="cpu")


def test_broken_weights_are_a_one_line_model_error(tmp_path):
    src = minilm_dir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        (tmp_path / name).symlink_to(src / name)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ModelError) as info:
        load_embedder(str(tmp_path), device="cpu")
    assert "\n" not in str(info.value)


def test_hub_id_offline_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(ModelError, match="not in the Hugging Face cache") as info:
        load_embedder("chunklab-tests/no-such-embedder", device="cpu")
    assert time.perf_counter() - t0 < 10
    assert "\n" not in str(info.value)


def test_spec_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("CHUNKLAB_EMBEDDER", raising=False)
    assert resolve_embedder_spec(None) == "minilm"
    monkeypatch.setenv("CHUNKLAB_EMBEDDER", str(tmp_path))
    assert resolve_embedder_spec(None) == str(tmp_path.resolve())
    assert resolve_embedder_spec("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    with pytest.raises(ModelError, match="neither a local folder nor"):
        resolve_embedder_spec("bad name with spaces")
    with pytest.raises(ModelError, match="empty"):
        resolve_embedder_spec("  ")
