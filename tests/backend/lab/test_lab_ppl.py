"""The Meta-Chunking view as the page and the CLI get it: the chunker chosen, θ's default, the cuts, exact outputs."""

from __future__ import annotations

import math

import pytest

from backend.chunkers import REGISTRY, make_chunker
from backend.chunkers.meta.algorithms import MarginStep, find_minima, sentence_values
from backend.chunkers.meta.results import MarginResult, PPLScores
from backend.errors import NotCached, ParameterError
from backend.lab.models import SessionModels
from backend.lab.ppl import (
    PPLSettings,
    ThresholdRange,
    default_threshold,
    held_margin,
    held_scores,
    margin_plan,
    margin_view,
    partial_view,
    ppl_view,
    scoring_plan,
    span_counter,
)
from backend.models.scoring import SentenceScore
from backend.models.types import PartialTokenScores
from backend.progress import Progress
from backend.text.document import Document
from tests.support.fake_scores import FakeScorer, fake_token_scores

SMALL = Document.from_text("The cat sat. It was warm. Dogs bark. Rain fell. We left. Night came. All slept.")
MEANS = [3.0, 1.0, 1.25, 0.75, 2.5, 2.0, 2.25]  # reference drops: sentence 1 → 2.0, 3 → 1.75, 5 → 0.5


def _scores(doc: Document = SMALL, means=MEANS) -> PPLScores:
    rows = tuple(
        SentenceScore(i, s.start, s.end, doc.text[s.start : s.end], 2, m, math.exp(m))
        for i, (s, m) in enumerate(zip(doc.sentences, means))
    )
    return PPLScores(doc.id, "model-id", "Model", rows)


def _spans(chunking) -> list[tuple[int, int, int]]:
    return [(c.start, c.end, c.tokens) for c in chunking]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_settings_choose_the_registered_chunker() -> None:
    assert PPLSettings().chunker == "ppl"
    assert PPLSettings(overlap=True).chunker == "ppl_overlap"
    assert PPLSettings(target_length=120).chunker == "ppl_combined"
    assert PPLSettings(target_length=120, overlap=True).chunker == "ppl_combined"  # overlap does not combine
    # The page's settings, others (guide, aim…) ignored, each checked by its Setting.
    page = {"rule": "paper", "guide": False, "aim": 300, "threshold": None}
    assert PPLSettings.of(page) == PPLSettings(rule="paper")
    with pytest.raises(ParameterError, match="rule must be one of reference, paper, got 'loose'"):
        PPLSettings.of({"rule": "loose"})


def test_theta_defaults_to_the_chosen_chunkers_own_default() -> None:
    assert (default_threshold("ppl"), default_threshold("ppl_overlap"), default_threshold("ppl_combined")) == (
        0.5, 0.5, 0.0
    )
    assert default_threshold("ppl_combined") == next(
        p.default for p in REGISTRY["ppl_combined"].params if p.name == "threshold"
    )
    assert PPLSettings().threshold_in_use == 0.5
    assert PPLSettings(target_length=12).threshold_in_use == 0.0
    assert PPLSettings(target_length=12, threshold=1.32).threshold_in_use == 1.32
    assert ppl_view(SMALL, _scores(), PPLSettings(target_length=12)).threshold == 0.0
    assert ppl_view(SMALL, _scores(), PPLSettings()).config.params_dict == {
        "threshold": 0.5, "rule": "reference", "value": "nll"
    }


def test_the_view_pins_chunks_cuts_range_stats_and_csv() -> None:
    view = ppl_view(SMALL, _scores(), PPLSettings(threshold=0.6))
    assert view.chunker == "ppl" and view.threshold == 0.6
    assert _spans(view.chunking) == [(0, 25, 8), (26, 47, 7), (48, 79, 9)]
    assert view.boundaries.kept == (1, 3) and view.boundaries.minima == 3
    assert [(c.index, c.drop) for c in view.cut.candidates] == [(1, 2.0), (3, 1.75), (5, 0.5)]
    assert view.slider == ThresholdRange(0.0, 2.01, 0.01)
    assert (view.total_tokens, view.sentences, view.value_name) == (23, 7, "mean NLL")
    stats = view.stats
    assert (stats.chunks, stats.mean_tokens, stats.max_tokens, stats.tokenizer, stats.over_target) == (
        3, 8.0, 9, "cl100k", 0
    )
    assert [r.split(",")[6:10] for r in view.values_csv().splitlines()] == [
        ["nll", "drop", "boundary", "chunk"],
        ["3.0", "", "0", "0"],
        ["1.0", "2.0", "1", "0"],
        ["1.25", "", "0", "1"],
        ["0.75", "1.75", "1", "1"],
        ["2.5", "", "0", "2"],
        ["2.0", "0.5", "0", "2"],
        ["2.25", "", "0", "2"],
    ]


@pytest.mark.parametrize(
    "settings",
    [
        PPLSettings(threshold=0.6),
        PPLSettings(threshold=-0.6, rule="paper"),
        PPLSettings(threshold=0.3, value="ppl"),
        PPLSettings(threshold=0.6, overlap=True),
        PPLSettings(target_length=12),
    ],
)
def test_the_cuts_shown_are_the_chunkers_boundaries(settings: PPLSettings) -> None:
    view = ppl_view(SMALL, _scores(), settings)
    chunker = make_chunker(view.chunker, view.config.params_dict, view.config.tokenizer)
    # The chunks are the registered chunker's own, and the cuts drawn are where its meta-chunks end.
    assert _spans(view.chunking) == _spans(chunker.chunk_from_means(SMALL, MEANS))
    values = sentence_values(MEANS, settings.value)
    assert list(view.boundaries.kept) == find_minima(values, view.threshold, settings.rule)
    if not settings.target_length:
        ends = {SMALL.sentences[i].end for i in view.boundaries.kept}
        assert ends == {c.end for c in view.chunking} - {SMALL.sentences[-1].end}


def test_the_theta_curve_and_its_aim() -> None:
    view = ppl_view(SMALL, _scores(), PPLSettings())
    curve = view.curve
    assert curve.thresholds[0] == view.slider.low and curve.thresholds[-1] == view.slider.high
    assert sorted(set(int(c) for c in curve.counts)) == [1, 2, 3, 4]
    # The smallest θ on the curve that gives the length nearest the aim (drops are 0.5, 1.75 and 2.0).
    assert [view.aim(length) for length in (6, 8, 11.5, 100)] == [
        (0.0, 5.75), (0.504602510460251, 23 / 3), (1.7576987447698742, 11.5), (2.0015899581589958, 23.0)
    ]
    data = view.curve_json(aim=6)
    assert {k: data[k] for k in ("rule", "value", "tokenizer", "sentences", "tokens", "low", "high", "step")} == {
        "rule": "reference", "value": "nll", "tokenizer": "cl100k", "sentences": 7, "tokens": 23,
        "low": 0.0, "high": 2.01, "step": 0.01,
    }
    assert len(data["thresholds"]) == len(data["chunks"]) == len(data["mean_tokens"])
    assert data["aim"] == {"length": 6, "threshold": 0.0, "mean_tokens": 5.75}
    assert (data["chunks"][0], data["chunks"][-1]) == (4, 1)


def test_the_span_counter_is_reused_only_for_its_document_and_tokenizer() -> None:
    first = ppl_view(SMALL, _scores(), PPLSettings())
    assert ppl_view(SMALL, _scores(), PPLSettings(threshold=1.0), first.counter).counter is first.counter
    words = ppl_view(SMALL, _scores(), PPLSettings(tokenizer="words"), first.counter).counter
    assert words is not first.counter and words.tokenizer.name == "words"
    other = Document.from_text("One. Two. Three.")
    assert span_counter(other, "cl100k", first.counter) is not first.counter


def test_scores_are_held_then_cached_then_planned(cache_dir) -> None:
    doc = Document.from_text("Tea is hot. Rain fell on the roof. Stocks crashed today. We went home.")
    models = SessionModels.of(FakeScorer())
    assert held_scores(None, doc, models) is None  # nothing cached yet: no model call here
    plan = scoring_plan(doc, models)
    assert plan.signature == (doc.id, models.identity) and plan.needs_lm
    scores = plan.run(Progress())
    assert isinstance(scores, PPLScores) and scores.doc_id == doc.id and scores.model == models.identity
    assert len(scores.sentences) == 4
    assert held_scores(scores, doc, models) is scores
    assert held_scores(scores, SMALL, models) is None


def test_margin_sampling_plan_and_view(cache_dir) -> None:
    doc = Document.from_text("Tea is hot. Rain fell on the roof. Stocks crashed today.")
    models = SessionModels.of(FakeScorer())
    plan = margin_plan(doc, models, "chunk")
    assert plan.signature == (doc.id, models.identity, "chunk")
    with pytest.raises(NotCached):
        plan.from_cache()  # the fake model's fingerprint is unknown: nothing to read
    result = plan.run(Progress())
    assert isinstance(result, MarginResult) and [s.index for s in result.steps] == [1, 2]
    assert held_margin(result, doc, models, "chunk") is result
    assert held_margin(result, doc, models, "sentence") is None

    steps = (
        MarginStep(1, 0.2, 0.0, True, 0), MarginStep(2, -0.1, 0.0, False, 1), MarginStep(3, 0.3, 0.0, True, 1),
        MarginStep(4, -0.2, 0.0, False, 3), MarginStep(5, 0.1, 0.04, True, 3), MarginStep(6, 0.0, 0.02, False, 5),
    )
    small = MarginResult(SMALL.id, "model-id", "chunk", steps)
    plain = margin_view(SMALL, small, PPLSettings())
    assert _spans(plain.chunking) == [(0, 12, 4), (13, 36, 7), (37, 56, 6), (57, 79, 6)]
    merged = margin_view(SMALL, small, PPLSettings(target_length=12))
    assert _spans(merged.chunking) == [(0, 36, 11), (37, 79, 12)]
    assert merged.config.params_dict == {"unit": "chunk", "language": "auto", "target_length": 12}
    assert (merged.stats.chunks, merged.stats.over_target, merged.stats.target_length) == (2, 0, 12)


def test_the_partial_view_draws_the_sentences_scored_so_far() -> None:
    ts = fake_token_scores(SMALL.text, seed=3)
    assert partial_view(SMALL, None, "m", "M", PPLSettings()) is None
    assert partial_view(SMALL, PartialTokenScores(ts, 3, "other text"), "m", "M", PPLSettings()) is None
    view = partial_view(SMALL, PartialTokenScores(ts, 6), "m", "M", PPLSettings(target_length=12))
    assert (view.sentences, view.total_sentences, view.tokens_scored, view.total_tokens) == (2, 7, 6, 16)
    assert view.boundaries.threshold == 0.0  # ppl_combined's default θ
    assert view.value_name == "mean NLL"
