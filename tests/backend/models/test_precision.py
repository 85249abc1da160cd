"""The CPU precisions of the language model: float16 and bfloat16 within their tolerances of float32, keyed apart.

Tolerances (measured on the bundled samples, documented in ``backend.models.devices``):
float16's mean NLL per sentence is within ``SENTENCE_NLL_TOLERANCE`` nats of float32's and the
PPL chunker's boundaries at the default threshold are the same on the two smallest bundled samples (their first
900 tokens here; every sample: ``bench/bench_scorer.py --precisions float16``);
bfloat16 (opt-in only) is within ``BFLOAT16_NLL_TOLERANCE`` on a fixed text. ``auto`` picks
float16 only where it measured faster, once per machine.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import backend.chunkers  # noqa: F401  (registers the chunkers)
from backend.chunkers import ModelContext, make_chunker
from backend.config import data_dir
from backend.errors import ParameterError
from backend.models import devices
from backend.models.cache import OutputCache
from backend.models.devices import (
    BFLOAT16_NLL_TOLERANCE,
    SENTENCE_NLL_TOLERANCE,
    auto_precision,
    forget_auto_precision,
    precision_suffix,
    reduced_linear,
    select_precision,
    set_precision,
)
from backend.models.identity import fingerprint_without_loading
from backend.models.lm import load_lm
from backend.models.scorer import LocalScorer
from backend.models.scoring import cached_token_scores, document_token_scores, score_sentences
from backend.samples import list_samples, load_sample
from backend.text.segment import sentence_spans
from tests.backend.chunkers.test_semantic_chunkers import sample_prefix

SENTENCE_TOL = SENTENCE_NLL_TOLERANCE


@pytest.fixture(autouse=True)
def _no_override(monkeypatch):
    monkeypatch.delenv("CHUNKLAB_PRECISION", raising=False)
    set_precision(None)
    yield
    set_precision(None)


def test_select_precision(monkeypatch) -> None:
    assert select_precision("cpu") == "float32"  # the default: today's numbers and keys
    assert select_precision("cpu", "BFloat16") == "bfloat16"
    assert select_precision("cpu", " float16 ") == "float16"
    assert select_precision("cuda:0", "float16") == "float16"  # a GPU runs the whole model in it
    assert select_precision("mps") == "float32"  # the default on every device: float32's shared keys
    assert select_precision("mps", "auto") == "float16"  # auto on a GPU: its default dtype
    monkeypatch.setattr(devices, "auto_precision", lambda: "float16")
    assert select_precision("cpu", "auto") == "float16"
    monkeypatch.setattr(devices, "auto_precision", lambda: "float32")
    assert select_precision("cpu", "auto") == "float32"
    monkeypatch.setenv("CHUNKLAB_PRECISION", "bfloat16")
    assert select_precision("cpu") == "bfloat16"
    set_precision("float32")  # --precision beats the variable
    assert select_precision("cpu") == "float32"
    with pytest.raises(ParameterError):
        select_precision("cpu", "int8")
    with pytest.raises(ParameterError):
        set_precision("half")
    set_precision(None)
    monkeypatch.setenv("CHUNKLAB_PRECISION", "half")
    with pytest.raises(ParameterError, match="CHUNKLAB_PRECISION"):
        select_precision("cpu")


@pytest.mark.parametrize(("f32", "f16", "expected"), [(1.0, 0.5, "float16"), (1.0, 0.95, "float32"), (1.0, 2.0, "float32")])
def test_auto_measures_once_per_machine_and_remembers(monkeypatch, f32, f16, expected) -> None:
    store = data_dir() / "models" / "precision.json"
    store.unlink(missing_ok=True)
    forget_auto_precision()
    calls: list[str] = []

    def fake(precision: str, rows: int = 512, repeat: int = 5) -> float:
        calls.append(precision)
        return {"float32": f32, "float16": f16}[precision]

    monkeypatch.setattr(devices, "measure_precision_speed", fake)
    try:
        assert auto_precision() == expected
        assert set(calls) == {"float32", "float16"}  # bfloat16 is never a candidate
        assert auto_precision() == expected  # this process: remembered
        saved = json.loads(store.read_text(encoding="utf-8"))
        assert [entry["auto"] for entry in saved.values()] == [expected]
        forget_auto_precision()
        calls.clear()
        assert auto_precision() == expected  # another process: read from the file, not measured
        assert calls == []
    finally:
        forget_auto_precision()
        store.unlink(missing_ok=True)


def test_reduced_linear_falls_back_to_float32_out_of_float16_range() -> None:
    import torch

    w = torch.tensor([[1.0, 2.0], [0.5, -1.0]])
    x = torch.tensor([[1.0, 1.0], [1e5, 3.0]])  # 1e5 is beyond float16's 65504
    y = reduced_linear(x, w.half())
    assert y.dtype == torch.float32 and bool(y.isfinite().all())
    assert torch.allclose(y, x @ w.T)


def test_suffix_keeps_float32_keys() -> None:
    assert precision_suffix("float32") == ""
    assert precision_suffix("bfloat16") == "+bfloat16"
    assert precision_suffix("float32", "cuda:1") == ""  # float32 is one key on every device
    assert precision_suffix("bfloat16", "cuda:1") == "+bfloat16-cuda"  # the whole model, not the CPU's mix
    assert precision_suffix("float16", "mps") == "+float16-mps"


@pytest.mark.parametrize("precision", ["float16", "bfloat16", "auto"])
def test_fingerprint_without_loading_defers_to_a_load_off_float32(monkeypatch, precision) -> None:
    assert fingerprint_without_loading(None) is not None
    monkeypatch.setenv("CHUNKLAB_PRECISION", precision)
    assert fingerprint_without_loading(None) is None  # a cache hit must not cross precisions


def test_cli_flag_sets_the_precision() -> None:
    from backend.cli.common import Parser, add_model_flags

    parser = Parser(prog="x")
    add_model_flags(parser)
    args = parser.parse_args(["--precision", "bfloat16"])
    assert args.precision == "bfloat16"
    assert devices.requested_precision() == "bfloat16"


@pytest.fixture(scope="module")
def scorers() -> dict[str, LocalScorer]:
    return {p: LocalScorer(load_lm(None, "cpu", precision=p)) for p in ("float32", "float16", "bfloat16")}


@pytest.fixture(scope="module")
def chunked(scorers, tmp_path_factory) -> dict[str, dict[str, tuple[np.ndarray, list[tuple[int, int]]]]]:
    """Per sample and precision: the sentences' mean NLLs and the PPL chunks at the default threshold."""
    cache = OutputCache(tmp_path_factory.mktemp("precision-cache"))
    out: dict[str, dict[str, tuple[np.ndarray, list[tuple[int, int]]]]] = {}
    for sample in SAMPLES:
        doc = sample_prefix(sample)
        out[sample] = {}
        for p in ("float32", "float16"):
            s = scorers[p]
            chunks = make_chunker("ppl").chunk(doc, ModelContext(scorer=s, _cache=cache)).chunks
            scores = cached_token_scores(cache, s.lm.info.fingerprint, doc.text, None)
            means = np.array([x.nll_mean for x in score_sentences(doc, scores)], dtype=float)
            out[sample][p] = (means, [(c.start, c.end) for c in chunks])
    return out


# The two smallest bundled samples (an English and a Chinese one), each up to its last paragraph within 900 cl100k
# tokens (``sample_prefix``: the release notes whole, the Chinese sample's first 665 characters; 7 and 6 PPL chunks):
# float16 on this CPU takes minutes for a few thousand characters. Every sample, whole, is measured by
# ``bench/bench_scorer.py --precisions float16``.
SAMPLES = tuple(sorted((s.name for s in list_samples()), key=lambda name: len(load_sample(name).text))[:2])


def _fixed_text() -> str:
    full = load_sample("narrative").text
    end = max(s.end for s in sentence_spans(full[:1900]) if s.end < 1800)
    return full[:end]


@pytest.mark.parametrize(("precision", "tolerance"), [("float16", SENTENCE_TOL), ("bfloat16", BFLOAT16_NLL_TOLERANCE)])
def test_nll_within_tolerance_on_a_fixed_text(scorers, precision, tolerance) -> None:
    f32, low = scorers["float32"], scorers[precision]
    assert low.lm.info.dtype == precision
    assert low.lm.info.fingerprint == f32.lm.info.fingerprint + precision_suffix(precision)
    text = _fixed_text()
    a, b = f32.token_nll(text), low.token_nll(text)
    assert np.array_equal(a.starts, b.starts)
    ok = np.isfinite(a.nll)
    assert np.isfinite(b.nll[ok]).all()
    assert not np.array_equal(a.nll[ok], b.nll[ok])  # it really ran at another precision
    assert abs(float(np.mean(a.nll[ok]) - np.mean(b.nll[ok]))) < tolerance
    means = [
        (float(np.nanmean(a.nll[(a.starts >= s.start) & (a.starts < s.end)])),
         float(np.nanmean(b.nll[(b.starts >= s.start) & (b.starts < s.end)])))
        for s in sentence_spans(text)
        if ((a.starts >= s.start) & (a.starts < s.end)).sum() > 1
    ]
    assert max(abs(x - y) for x, y in means) <= tolerance


@pytest.mark.parametrize("sample", SAMPLES)
def test_float16_sentence_nll_within_tolerance(chunked, sample) -> None:
    a, b = chunked[sample]["float32"][0], chunked[sample]["float16"][0]
    print(f"{sample}: max |ΔNLL| per sentence {np.nanmax(np.abs(a - b)):.4f}")
    assert np.nanmax(np.abs(a - b)) <= SENTENCE_TOL


@pytest.mark.parametrize("sample", SAMPLES)
def test_ppl_boundaries_unchanged(chunked, sample) -> None:
    assert len(chunked[sample]["float32"][1]) > 2  # boundaries to compare
    assert chunked[sample]["float32"][1] == chunked[sample]["float16"][1]


def test_cache_entries_never_cross_precisions(scorers, tmp_path) -> None:
    cache = OutputCache(tmp_path)
    text = _fixed_text()
    f32 = scorers["float32"]
    document_token_scores(text, f32, cache=cache)
    assert cached_token_scores(cache, f32.lm.info.fingerprint, text, None) is not None
    for precision in ("float16", "bfloat16"):
        low = scorers[precision]
        assert cached_token_scores(cache, low.lm.info.fingerprint, text, None) is None
        document_token_scores(text, low, cache=cache)
        a = cached_token_scores(cache, f32.lm.info.fingerprint, text, None)
        b = cached_token_scores(cache, low.lm.info.fingerprint, text, None)
        assert a is not None and b is not None and not np.array_equal(a.nll, b.nll, equal_nan=True)
