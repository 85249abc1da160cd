"""FreeChunker's building blocks: token units, windows, mean vectors, merged runs and the encoder.

Small cases are pinned by hand. The encoder is checked against :func:`reference_encode`, a
plain re-implementation of eq. 2-5 with the full ``m x n`` chunk pattern mask, written from the
paper and the weight layout independently of the module's blocked computation.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from backend.errors import ModelError, ParameterError
from backend.chunkers.multi import parse_granularities, token_units
from backend.retrieval.multi.freechunker import (
    CrossGranularityEncoder,
    EncoderConfig,
    Run,
    Window,
    assemble_runs,
    chunk_pattern_mask,
    load_encoder,
    mean_vectors,
    windows,
)
from backend.tokenizers import get_tokenizer
from tests.conftest import ROOT

# --- token units -----------------------------------------------------------------------------

TEXT = "\n  Chunk Lab compares chunkers. FreeChunker embeds units once; windows reuse them."


def test_token_units_pinned_cl100k():
    tok = get_tokenizer("cl100k")
    units = token_units(TEXT, tok, 4)
    assert units == [(3, 27), (27, 41), (41, 56), (56, 76), (76, 82)]
    assert [TEXT[a:b] for a, b in units] == [
        "Chunk Lab compares chunk",
        "ers. FreeChunk",
        "er embeds units",
        " once; windows reuse",
        " them.",
    ]
    assert "".join(TEXT[a:b] for a, b in units) == TEXT[3:]  # from the first non-space character
    counts = [tok.count(TEXT[a:b]) for a, b in units]
    assert counts[:-1] == [4, 4, 4, 4] and counts[-1] <= 4


@pytest.mark.parametrize("size", [3, 4, 7, 50])
def test_token_units_cover_multibyte_text_exactly(size):
    tok = get_tokenizer("cl100k")
    text = "  Zürich und 東京 sind Städte 🌍🌍🌍 mit Ümlauten — naïve café.\n\nEin zweiter Absatz folgt hier. "
    units = token_units(text, tok, size)
    assert units[0][0] == 2 and units[-1][1] == len(text)
    assert all(a < b for a, b in units)
    assert all(units[k][1] == units[k + 1][0] for k in range(len(units) - 1))
    assert all(tok.count(text[a:b]) <= size for a, b in units)
    assert not any(text[a:b].isspace() for a, b in units)


def test_token_units_blank_and_whitespace_units():
    tok = get_tokenizer("cl100k")
    assert token_units("", tok, 8) == []
    assert token_units(" \n\t ", tok, 8) == []
    # A whitespace-only piece joins the unit before it: no unit is blank.
    text = "one two three four\n\n\n\n      \n\n\n   five six"
    units = token_units(text, tok, 1)
    assert [text[a:b] for a, b in units] == ["one", " two", " three", " four\n\n\n\n      \n\n\n  ", " five", " six"]


def test_token_units_other_tokenizers():
    text = "alpha beta gamma delta epsilon"
    assert token_units(text, get_tokenizer("words"), 2) == [(0, 11), (11, 23), (23, 30)]
    assert token_units("abcdefg", get_tokenizer("chars"), 3) == [(0, 3), (3, 6), (6, 7)]


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_token_units_rejects_bad_size(bad):
    with pytest.raises(ParameterError, match="unit_tokens"):
        token_units("some text", get_tokenizer("words"), bad)


# --- windows ---------------------------------------------------------------------------------


def test_windows_seven_units():
    units = [Window(1, i, i + 1) for i in range(7)]
    twos = [Window(2, s, s + 2) for s in range(6)]  # stride 1, the last ends at 7: no tail
    fours = [Window(4, 0, 4), Window(4, 2, 6), Window(4, 3, 7)]  # stride 2, then the tail [3, 7)
    assert windows(7, (2, 4)) == units + twos + fours
    assert windows(7, (4, 2, 4), include_units=False) == twos + fours


def test_windows_small_documents():
    assert windows(0) == []
    assert windows(1) == [Window(1, 0, 1)]  # the unit already spans the document
    assert windows(1, include_units=False) == [Window(1, 0, 1)]
    assert windows(3, (2, 4)) == [
        Window(1, 0, 1), Window(1, 1, 2), Window(1, 2, 3),
        Window(2, 0, 2), Window(2, 1, 3),
        Window(3, 0, 3),  # 4 > 3 units: one window of all units
    ]
    assert windows(3, (4, 8, 16), include_units=False) == [Window(3, 0, 3)]  # once, however many sizes exceed
    assert windows(4, (2, 4, 8), include_units=False)[-1] == Window(4, 0, 4)  # g == n already spans it
    assert len(windows(4, (2, 4, 8), include_units=False)) == 4


def test_windows_tail_and_stride():
    assert windows(10, (6,), include_units=False) == [Window(6, 0, 6), Window(6, 3, 9), Window(6, 4, 10)]
    assert windows(9, (3,), include_units=False) == [Window(3, s, s + 3) for s in range(7)]  # stride 3 // 2 = 1


@pytest.mark.parametrize("sizes", [(1,), (0, 2), (2, -4)])
def test_windows_reject_small_sizes(sizes):
    with pytest.raises(ParameterError, match="granularity"):
        windows(5, sizes)


def test_chunk_pattern_mask_is_eq_1():
    inf = -np.inf
    mask = chunk_pattern_mask([Window(2, 0, 2), Window(2, 1, 3), Window(1, 3, 4)], 4)
    assert mask.dtype == np.float32
    np.testing.assert_array_equal(mask, [[0, 0, inf, inf], [inf, 0, 0, inf], [inf, inf, inf, 0]])
    np.testing.assert_array_equal(chunk_pattern_mask([Window(2, 1, 3)], 4, start=2), [[0, inf]])


# --- granularities ---------------------------------------------------------------------------


def test_parse_granularities_good():
    assert parse_granularities("2,4") == (2, 4)
    assert parse_granularities(" 8 , 2,4,2 ") == (2, 4, 8)
    assert parse_granularities("64") == (64,)


@pytest.mark.parametrize(
    "raw, named",
    [("", "''"), ("1,2", "'1'"), ("2,65", "'65'"), ("2,x", "'x'"), ("2,,4", "''"), ("2.5", "'2.5'"), ("-2", "'-2'")],
)
def test_parse_granularities_bad(raw, named):
    with pytest.raises(ParameterError) as info:
        parse_granularities(raw)
    assert named in str(info.value) and "\n" not in str(info.value)


# --- mean vectors ----------------------------------------------------------------------------


def test_mean_vectors_equal_brute_force():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(13, 8)).astype(np.float32)
    wins = windows(13, (2, 3, 4, 20))
    got = mean_vectors(vectors, wins)
    want = []
    for w in wins:
        mean = vectors[w.first : w.last].astype(np.float64).mean(axis=0)
        want.append(mean / np.linalg.norm(mean))
    assert got.dtype == np.float32 and got.shape == (len(wins), 8)
    np.testing.assert_allclose(got, np.array(want), rtol=0, atol=1e-6)


def test_mean_vectors_zero_mean_stays_zero_and_bounds_checked():
    vectors = np.array([[1.0, 2.0], [-1.0, -2.0], [3.0, 4.0]], dtype=np.float32)
    got = mean_vectors(vectors, [Window(2, 0, 2), Window(1, 2, 3)])
    np.testing.assert_array_equal(got[0], [0.0, 0.0])
    np.testing.assert_allclose(got[1], [0.6, 0.8], rtol=1e-6)
    assert mean_vectors(vectors, []).shape == (0, 2)
    with pytest.raises(ParameterError, match="window"):
        mean_vectors(vectors, [Window(2, 2, 4)])
    with pytest.raises(ParameterError, match="2-D"):
        mean_vectors(np.zeros(3), [Window(1, 0, 1)])


# --- runs ------------------------------------------------------------------------------------

RANGES = [(0, 10), (10, 20), (20, 30), (31, 40), (40, 50), (50, 60), (61, 70), (70, 80)]


def test_assemble_runs_merges_overlapping_and_adjacent_ranks_by_best():
    hits = [
        (Window(2, 0, 2), 0.9),  # overlaps the next: one run [0, 3)
        (Window(2, 1, 3), 0.5),
        (Window(1, 4, 5), 0.7),  # adjacent to the next: one run [4, 6)
        (Window(1, 5, 6), 0.95),
        (Window(1, 7, 8), 0.7),  # unit 6 lies between: a run of its own
    ]
    assert assemble_runs(hits, RANGES) == [
        Run(first=4, last=6, start=40, end=60, score=0.95, rank=1, entries=(2, 3)),
        Run(first=0, last=3, start=0, end=30, score=0.9, rank=2, entries=(0, 1)),
        Run(first=7, last=8, start=70, end=80, score=0.7, rank=3, entries=(4,)),
    ]


def test_assemble_runs_bridges_transitively_and_breaks_ties_by_position():
    bridged = assemble_runs([(Window(2, 0, 2), 0.3), (Window(2, 3, 5), 0.4), (Window(4, 1, 4), 0.2)], RANGES)
    assert [(r.first, r.last, r.entries, r.score) for r in bridged] == [(0, 5, (0, 1, 2), 0.4)]
    tied = assemble_runs([(Window(1, 6, 7), 0.5), (Window(1, 2, 3), 0.5), (Window(1, 4, 5), 0.6)], RANGES)
    assert [(r.first, r.rank) for r in tied] == [(4, 1), (2, 2), (6, 3)]
    assert assemble_runs([], RANGES) == []
    with pytest.raises(ParameterError, match="window"):
        assemble_runs([(Window(2, 7, 9), 0.1)], RANGES)


def test_assemble_runs_never_counts_a_character_twice():
    rng = np.random.default_rng(1)
    wins = windows(len(RANGES), (2, 4))
    for _ in range(200):
        picked = rng.choice(len(wins), size=int(rng.integers(1, 8)), replace=False)
        hits = [(wins[int(i)], float(rng.random())) for i in picked]
        runs = assemble_runs(hits, RANGES)
        chars = [c for r in runs for c in range(r.start, r.end)]
        assert len(chars) == len(set(chars))
        assert sorted(i for r in runs for i in r.entries) == list(range(len(hits)))
        assert [r.rank for r in runs] == list(range(1, len(runs) + 1))
        assert all(a.score >= b.score for a, b in zip(runs, runs[1:]))
        for r in runs:
            assert r.score == max(hits[i][1] for i in r.entries)
            assert all(r.first <= hits[i][0].first and hits[i][0].last <= r.last for i in r.entries)
        spans = sorted((r.first, r.last) for r in runs)
        assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))  # maximal: not even adjacent


# --- the cross-granularity encoder -----------------------------------------------------------

TINY = EncoderConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=24, input_size=12)


def reference_encode(folder, unit_vectors, wins):
    """Eq. 2-5 with the full chunk pattern mask, from the saved weights (the test's own code)."""
    import torch
    from safetensors.torch import load_file

    cfg = json.loads((folder / "config.json").read_text())
    w = {k.removeprefix("roberta."): v.double() for k, v in load_file(str(folder / "model.safetensors")).items()}
    h, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg.get("layer_norm_eps", 1e-5)
    n, d = unit_vectors.shape
    E = torch.zeros((n, h), dtype=torch.float64)
    E[:, :d] = torch.from_numpy(unit_vectors.astype(np.float64))
    P = torch.from_numpy(chunk_pattern_mask(wins, n)).double()
    ln = torch.nn.functional.layer_norm
    q0 = w["embeddings.word_embeddings.weight"][0] + w["embeddings.position_embeddings.weight"][0]
    q0 = q0 + w["embeddings.token_type_embeddings.weight"][0]
    H = ln(q0, (h,), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps).repeat(len(wins), 1)
    for i in range(cfg["num_hidden_layers"]):
        def g(name, i=i):
            return w[f"encoder.layer.{i}.{name}"]

        heads_out = []
        Q = H @ g("attention.self.query.weight").T + g("attention.self.query.bias")
        K = E @ g("attention.self.key.weight").T + g("attention.self.key.bias")
        V = E @ g("attention.self.value.weight").T + g("attention.self.value.bias")
        hd = h // heads
        for k in range(heads):
            cols = slice(k * hd, (k + 1) * hd)
            att = torch.softmax(Q[:, cols] @ K[:, cols].T / hd**0.5 + P, dim=-1)
            heads_out.append(att @ V[:, cols])
        A = torch.cat(heads_out, dim=1) @ g("attention.output.dense.weight").T + g("attention.output.dense.bias")
        Vn = ln(H + A, (h,), g("attention.output.LayerNorm.weight"), g("attention.output.LayerNorm.bias"), eps)
        F1 = torch.nn.functional.gelu(Vn @ g("intermediate.dense.weight").T + g("intermediate.dense.bias"))
        F2 = F1 @ g("output.dense.weight").T + g("output.dense.bias")
        H = ln(Vn + F2, (h,), g("output.LayerNorm.weight"), g("output.LayerNorm.bias"), eps)
    out = torch.nn.functional.normalize(H[:, :d], dim=-1).numpy()
    for row, win in enumerate(wins):  # single units keep their own vector
        if win.last - win.first == 1:
            out[row] = unit_vectors[win.first] / np.linalg.norm(unit_vectors[win.first])
    return out.astype(np.float32)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return CrossGranularityEncoder.random(TINY, seed=3).save(tmp_path_factory.mktemp("encoder"))


def test_encoder_round_trip_and_matches_reference(tiny_folder):
    rng = np.random.default_rng(2)
    vectors = rng.normal(size=(300, 12)).astype(np.float32)
    wins = windows(300, (2, 4, 8))  # more windows than one block holds
    original = CrossGranularityEncoder.random(TINY, seed=3).encode(vectors, wins)
    loaded = load_encoder(f"model:{tiny_folder}", device="cpu")
    got = loaded.encode(vectors, wins)
    assert got.dtype == np.float32 and got.shape == (len(wins), 12)
    np.testing.assert_array_equal(got, original)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(got, reference_encode(tiny_folder, vectors, wins), atol=2e-5)
    np.testing.assert_allclose(got[:300], vectors / np.linalg.norm(vectors, axis=1, keepdims=True), atol=1e-6)


def test_encoder_mask_restricts_attention(tiny_folder):
    encoder = load_encoder(f"model:{tiny_folder}", device="cpu")
    rng = np.random.default_rng(4)
    vectors = rng.normal(size=(9, 12)).astype(np.float32)
    wins = windows(9, (2, 4), include_units=False)
    before = encoder.encode(vectors, wins)
    changed = vectors.copy()
    changed[5] = rng.normal(size=12)
    after = encoder.encode(changed, wins)
    for row, win in enumerate(wins):
        if win.first <= 5 < win.last:
            assert not np.allclose(after[row], before[row])
        else:
            np.testing.assert_array_equal(after[row], before[row])


def test_encoder_dimension_mismatch(tiny_folder, tmp_path):
    encoder = load_encoder(f"model:{tiny_folder}", device="cpu")
    with pytest.raises(ModelError, match="trained on 12-dim unit vectors; got 8-dim"):
        encoder.encode(np.ones((4, 8), dtype=np.float32), windows(4))
    # The authors' config has no input_size: narrower vectors are zero-padded, wider ones refused.
    raw = json.loads((tiny_folder / "config.json").read_text())
    del raw["input_size"]
    (tmp_path / "config.json").write_text(json.dumps(raw))
    (tmp_path / "model.safetensors").write_bytes((tiny_folder / "model.safetensors").read_bytes())
    authors = load_encoder(f"model:{tmp_path}", device="cpu")
    assert authors.encode(np.ones((4, 8), dtype=np.float32), windows(4)).shape == (8, 8)
    with pytest.raises(ModelError, match="at most 16 dims; got 20-dim"):
        authors.encode(np.ones((4, 20), dtype=np.float32), windows(4))


def test_encoder_reads_prefixed_weights(tiny_folder, tmp_path):
    from safetensors.torch import load_file, save_file

    weights = load_file(str(tiny_folder / "model.safetensors"))
    save_file({f"roberta.{k}": v for k, v in weights.items()}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text((tiny_folder / "config.json").read_text())
    vectors = np.random.default_rng(5).normal(size=(6, 12)).astype(np.float32)
    a = load_encoder(f"model:{tmp_path}", device="cpu").encode(vectors, windows(6))
    b = load_encoder(f"model:{tiny_folder}", device="cpu").encode(vectors, windows(6))
    np.testing.assert_array_equal(a, b)


def _copy(src, dst, config=None):
    dst.mkdir()
    (dst / "model.safetensors").write_bytes((src / "model.safetensors").read_bytes())
    (dst / "config.json").write_text(config if config is not None else (src / "config.json").read_text())
    return dst


def test_load_encoder_errors(tiny_folder, tmp_path):
    cfg = json.loads((tiny_folder / "config.json").read_text())
    with pytest.raises(ParameterError, match="model:PATH"):
        load_encoder(str(tiny_folder))
    with pytest.raises(ModelError, match="does not exist"):
        load_encoder(f"model:{tmp_path / 'nowhere'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="has no config.json"):
        load_encoder(f"model:{tmp_path / 'empty'}")
    cases = {
        "notjson": ("{", "not a readable JSON"),
        "heads": (json.dumps({**cfg, "num_attention_heads": 3}), "not a multiple"),
        "nolayers": (json.dumps({k: v for k, v in cfg.items() if k != "num_hidden_layers"}), "num_hidden_layers"),
        "wide": (json.dumps({**cfg, "intermediate_size": 32}), "has shape"),
        "deeper": (json.dumps({**cfg, "num_hidden_layers": 3}), "missing weight"),
        "act": (json.dumps({**cfg, "hidden_act": "tanh"}), "hidden_act"),
        "relative": (json.dumps({**cfg, "position_embedding_type": "relative_key"}), "position_embedding_type"),
    }
    for name, (config, message) in cases.items():
        folder = _copy(tiny_folder, tmp_path / name, config)
        with pytest.raises(ModelError, match=message) as info:
            load_encoder(f"model:{folder}", device="cpu")
        assert "\n" not in str(info.value)
    broken = _copy(tiny_folder, tmp_path / "broken")
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(ModelError, match="safetensors"):
        load_encoder(f"model:{broken}", device="cpu")


def test_module_import_stays_light():
    code = (
        "import sys, backend.retrieval.multi.freechunker\n"
        "print([m for m in ('torch', 'safetensors', 'transformers') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
