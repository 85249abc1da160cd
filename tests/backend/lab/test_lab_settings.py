"""The page settings: ranges and choices from the chunkers and metrics they belong to, and what a saved session may hold."""

from __future__ import annotations

import pytest

from backend.chunkers import REGISTRY
from backend.errors import ParameterError
from backend.lab.settings import SECTIONS, checked_settings, iter_settings, setting, settings_of
from backend.metrics.formulas import BC_MODES, CS_RULES, DEFAULT_K
from backend.metrics.report import METRICS


def test_a_chunker_parameter_is_the_chunkers_own() -> None:
    rule = setting("ppl", "rule")
    assert rule.param is next(p for p in REGISTRY["ppl"].params if p.name == "rule")
    assert setting("ppl", "threshold").default is None  # θ follows the chosen PPL chunker's default
    target = setting("ppl", "target_length")
    assert (target.low, target.high, target.default) == (0, 100_000, 0)


def test_quality_settings_come_from_the_metrics() -> None:
    assert setting("quality", "metrics").choices == METRICS and setting("quality", "metrics").many
    assert setting("quality", "cs_rule").choices == CS_RULES and setting("quality", "bc_mode").choices == BC_MODES
    k = setting("quality", "K")
    assert (k.low, k.high, k.default, k.step) == (0.0, 1.5, DEFAULT_K, 0.01)


def test_check_refuses_another_type_a_value_out_of_range_and_unknown_choices() -> None:
    k = setting("quality", "K")
    assert k.check(1) == 1.0 and k.valid(0.5)
    for bad in ("0.5", True, 2.0, -0.1, None):
        with pytest.raises(ParameterError):
            k.check(bad)
    metrics = setting("quality", "metrics")
    assert metrics.check(["cs", "bc"]) == ["cs", "bc"]
    assert not metrics.valid(["bc", "bc"]) and not metrics.valid(["xx"]) and not metrics.valid("bc")
    assert setting("ppl", "threshold").check(None) is None and setting("ppl", "threshold").check(0.25) == 0.25


def test_checked_settings_keep_the_valid_ones_and_read_old_names() -> None:
    raw = {
        "ppl": {"theta": 0.4, "rule": "paper", "value": 3},  # θ was saved as "theta" before
        "quality": {"K": 2.0, "metrics": ["bc", "cs"], "nonsense": 1},
        "elsewhere": {"x": 1},
        "compare": "not a mapping",
    }
    values, dropped = checked_settings(raw)
    assert values == {"ppl": {"threshold": 0.4, "rule": "paper"}, "quality": {"metrics": ["bc", "cs"]}}
    assert sorted(dropped) == ["ppl.value", "quality.K", "quality.nonsense"]


def test_every_setting_has_a_valid_default_and_a_known_section() -> None:
    for s in iter_settings():
        assert s.section in SECTIONS
        assert s.default is None or s.valid(s.default), s.path
    assert [s.name for s in settings_of("benchmark")] == ["source", "sample", "retrieve", "auto", "cross"]
    assert set(setting("benchmark", "sample").choices) >= {"narrative", "technical"}
