"""The PPL pass's time estimate (backend/lab/ppl.py): measured on this machine, only the text still to score."""

from __future__ import annotations

import numpy as np
import pytest

from backend.lab.models import SessionModels
from backend.lab.ppl import scoring_estimate, scoring_label
from backend.models.cache import OutputCache
from backend.models.rates import RateKey, rate_store
from backend.models.scoring import checkpoint_key
from backend.text.document import Document
from tests.support.quality import LengthScorer

DOC = Document.from_text("One sentence here. Another one follows. " * 50, source="estimate.txt")  # 2,000 characters


class WindowedScorer(LengthScorer):
    """A stand-in with the local scorer's window arithmetic: windows of 100 tokens, later ones scoring 50."""

    def resolve_window(self, window=None, block=None):
        return 100, 50

    def window_work(self, fed: int, scored: int) -> float:
        return float(fed)  # one unit per token fed: a later window costs twice per token scored


@pytest.fixture(autouse=True)
def lab(tmp_path, monkeypatch) -> OutputCache:
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    return OutputCache(tmp_path / "cache")


def _measured(units: float, work: float, seconds: float, chars: float) -> None:
    rate_store().record(RateKey.of(LengthScorer.info, "token_nll"), units, work, seconds, chars)


def test_before_any_pass_the_first_run_measures_it() -> None:
    models = SessionModels.of(LengthScorer())
    assert scoring_estimate(DOC, models) is None
    assert scoring_label(DOC, models) == "Score with length-scorer (time measured on the first run)"


def test_without_the_model_the_estimate_is_at_the_characters_per_second_measured() -> None:
    _measured(units=500, work=1_000.0, seconds=10.0, chars=2_000.0)  # 200 characters/s
    models = SessionModels.of(LengthScorer())
    models = SessionModels("length-scorer", models.fingerprint, "lm", None)  # not loaded: no window arithmetic
    assert scoring_estimate(DOC, models) == pytest.approx(2_000 / 200)
    assert scoring_label(DOC, models) == "Score with length-scorer (10 s)"


def test_with_the_model_the_windows_are_priced_in_work() -> None:
    _measured(units=500, work=1_000.0, seconds=10.0, chars=2_000.0)  # 100 work/s, 4 characters a token
    models = SessionModels.of(WindowedScorer())
    # 2,000 characters ≈ 500 tokens: windows (0,1,100), then 8 of 50 scored after 50 of context, 100 fed each.
    assert scoring_estimate(DOC, models) == pytest.approx((100 + 8 * 100) / 100.0)


def test_a_checkpoint_leaves_only_the_rest_to_score(lab) -> None:
    _measured(units=500, work=1_000.0, seconds=10.0, chars=2_000.0)
    models = SessionModels("length-scorer", LengthScorer.info.fingerprint, "lm", None)
    starts = np.arange(0, 2_000, 4, dtype=np.int64)  # 500 tokens of 4 characters
    lab.put(checkpoint_key(models.fingerprint, DOC.text, None), {
        "starts": starts, "ends": starts + 4, "nll": np.zeros(500), "window": 100, "scored": 250,
    })
    assert scoring_estimate(DOC, models) == pytest.approx(1_000 / 200)  # the 1,000 characters after token 250
