"""The first scoring pass publishes its results as it goes: in order, whole sentences only, a prefix of the final ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backend.jobs import start_job
from backend.models.scoring import document_token_scores, partial_sentence_scores, score_sentences
from backend.models.types import PartialTokenScores
from backend.progress import Progress
from backend.text.document import Document
from tests.support.fake_scores import fake_token_scores

TEXT = (
    "The cat sat on the mat. It was warm by the fire. Then the dog came and barked loudly! "
    "Stock prices fell sharply on Monday. Investors worried about inflation. The central bank said nothing. "
    "Meanwhile, the cat went back to sleep. Gluons bind quarks together."
)


@pytest.fixture(scope="module")
def scorer():
    """The bundled SmolLM2 on the CPU."""
    from backend.models.scorer import load_scorer

    return load_scorer(device="cpu")


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _is_prefix(part, final) -> bool:
    return len(part) <= len(final) and all(
        (p.index, p.start, p.end, p.tokens) == (f.index, f.start, f.end, f.tokens) and _same(p.nll_mean, f.nll_mean)
        for p, f in zip(part, final)
    )


def test_partial_scores_arrive_in_order_and_are_a_prefix_of_the_final_values(scorer):
    doc = Document.from_text(" ".join([TEXT] * 3), source="partial.txt")
    seen: list[PartialTokenScores] = []
    tracker = Progress(partial=seen.append)
    # A 16-token window (8 scored per later window) makes many windows of a short text,
    # more than one CPU batch (at most 8 windows), so several partial results.
    final_ts, hit = document_token_scores(doc.text, scorer, window=16, progress=tracker)
    assert not hit
    final = score_sentences(doc, final_ts)

    assert len(seen) >= 3  # several windows, each batch published
    counts = [p.scored for p in seen]
    assert counts == sorted(counts)  # in order
    assert seen[-1].complete and seen[-1].scored == len(final_ts)
    np.testing.assert_array_equal(seen[-1].scores.nll, final_ts.nll)
    lengths = []
    for p in seen:
        k = p.scored
        np.testing.assert_array_equal(p.scores.nll[:k], final_ts.nll[:k])  # final values below k
        assert np.isnan(p.scores.nll[k:]).all()  # nothing beyond k yet
        sentences = partial_sentence_scores(doc, p)
        assert _is_prefix(sentences, final)
        lengths.append(len(sentences))
    assert lengths == sorted(lengths)
    assert 0 < lengths[len(lengths) // 2] < len(final)  # the curve grows: part of it before the end
    assert lengths[-1] == len(final)


def test_a_job_keeps_the_latest_partial_result(scorer):
    doc = Document.from_text(TEXT, source="partial.txt")
    job = start_job("score", lambda progress: scorer.token_nll(doc.text, window=16, progress=progress))
    assert job.wait(120) and job.state == "done"
    assert isinstance(job.partial, PartialTokenScores) and job.partial.complete
    np.testing.assert_array_equal(job.partial.scores.nll, job.result.nll)


def test_a_half_scored_sentence_is_never_shown():
    doc = Document.from_text(TEXT, source="partial.txt")
    ts = fake_token_scores(doc.text)
    final = score_sentences(doc, ts)
    previous = 0
    for k in range(len(ts) + 1):
        nll = ts.nll.copy()
        nll[k:] = np.nan
        part = partial_sentence_scores(doc, PartialTokenScores(type(ts)(ts.starts, ts.ends, nll, ts.window), k))
        assert _is_prefix(part, final) and len(part) >= previous
        previous = len(part)
        # every token starting inside a shown sentence is among the k scored ones
        for s in part:
            inside = (ts.starts >= s.start) & (ts.starts < s.end)
            assert not inside[k:].any()
    assert previous == len(final)
