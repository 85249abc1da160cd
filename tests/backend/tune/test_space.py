"""The tuning search space: declared once on the chunkers' Params, sampled by Optuna, listed as a grid (issue 36)."""

from __future__ import annotations

import subprocess
import sys

import optuna
import pytest

from backend.chunkers import REGISTRY, ModelContext, make_chunker, run_chunker
from backend.chunkers.base import Param, Search
from backend.chunking import ChunkerConfig
from backend.errors import ParameterError
from backend.models.cache import OutputCache
from backend.samples import load_sample
from backend.text.document import Document
from backend.tune.space import (
    BASELINE,
    NOT_TUNABLE,
    TUNABLE,
    SearchSpace,
    check_families,
    default_families,
    family_needs,
    search_space,
    tunable_families,
)
from backend.tune.types import LeftOut
from tests.conftest import ROOT

optuna.logging.set_verbosity(optuna.logging.WARNING)

MODEL_FREE = ("fixed_token", "recursive", "paragraph", "sentence")
EMBEDDER = ("semantic", "semantic_max", "cluster")
LM = ("ppl", "ppl_combined", "ppl_overlap", "margin_sampling")


def _config(spec: str) -> ChunkerConfig:
    name, params, tokenizer = ChunkerConfig.parse(spec)
    return make_chunker(name, params, tokenizer).config


# --- the declarations -------------------------------------------------------------------------


def test_every_declared_search_lies_within_its_param():
    checked = 0
    for name, cls in REGISTRY.items():
        names = [p.name for p in cls.params]
        for i, p in enumerate(cls.params):
            if p.search is None:
                continue
            checked += 1
            values = p.search.values()
            assert values, f"{name}.{p.name}: empty grid"
            if p.search.of is not None:
                # A fraction of an earlier parameter of the same chunker, below 1: the relation always holds.
                assert p.search.of in names[:i], f"{name}.{p.name}: of={p.search.of} is not an earlier parameter"
                assert all(0 <= v < 1 for v in values), f"{name}.{p.name}: fractions {values}"
                continue
            for v in values:
                p.coerce(v, name)  # the Param's own type, min, max and choices
    assert checked == 16


def test_tuned_families_and_ranges_are_the_declared_ones():
    assert tunable_families() == TUNABLE == (
        "fixed_token", "recursive", "paragraph", "semantic", "semantic_max", "cluster", "sentence",
        "ppl", "ppl_combined", "ppl_overlap", "margin_sampling",
    )
    sizes = (32, 50, 64, 100, 128, 200, 256, 400, 512, 800, 1024)
    recursive = {p.name: p.search.values() for p in REGISTRY["recursive"].params}
    assert recursive == {"chunk_size": sizes, "chunk_overlap": (0.0, 0.125, 0.25, 0.375, 0.5)}
    ppl = {p.name: p.search for p in REGISTRY["ppl"].params}
    assert ppl["threshold"] == Search(low=0.0, high=4.0, step=0.1) and ppl["rule"] is None and ppl["value"] is None
    assert len(ppl["threshold"].values()) == 41 and ppl["threshold"].values()[3] == 0.3
    assert all(not any(p.search for p in REGISTRY[n].params) for n in NOT_TUNABLE)
    assert set(NOT_TUNABLE) | set(TUNABLE) == set(REGISTRY)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "a range needs low, high and step"),
        ({"low": 1, "high": 10}, "a range needs low, high and step"),
        ({"low": 10, "high": 1, "step": 1}, "bad range"),
        ({"low": 1, "high": 10, "step": 0}, "bad range"),
        ({"choices": ()}, "give choices, or low, high and step"),
        ({"choices": (1, 2), "low": 1}, "give choices, or low, high and step"),
        ({"choices": (1, 1)}, "repeated choices"),
        ({"low": 1, "high": 64, "step": 2, "log": True}, "log needs step 1"),
        ({"choices": (1, 2), "log": True}, "log applies to a range"),
    ],
)
def test_a_malformed_search_is_refused_where_it_is_declared(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Search(**kwargs)


def test_search_values_and_json():
    assert Search(low=0.0, high=0.5, step=0.125).values() == (0.0, 0.125, 0.25, 0.375, 0.5)
    assert Search(low=2, high=9, step=3).values() == (2, 5, 8)
    assert Search(low=0.0, high=0.3, step=0.1).values() == (0.0, 0.1, 0.2, 0.3)
    assert Search(choices=("a", "b")).values() == ("a", "b")
    param = Param("chunk_size", "int", 200, "h", min=1, max=10, search=Search(choices=(2, 4)))
    assert param.to_json()["search"] == {"low": None, "high": None, "step": None, "log": False, "choices": [2, 4],
                                         "of": None}
    assert Param("x", "int", 1, "h").to_json()["search"] is None


# --- families -------------------------------------------------------------------------------


def test_check_families_dedups_and_keeps_order():
    assert check_families(["ppl", "recursive", "ppl", " recursive"]) == ("ppl", "recursive")


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["foo"], "unknown family 'foo'; choose from fixed_token, recursive, paragraph, semantic, semantic_max, "
                  "cluster, sentence, ppl, ppl_combined, ppl_overlap, margin_sampling"),
        (["manual"], "manual cannot be tuned (its cuts are edits made by hand on one document; tune the "
                     "configuration it was edited from); choose from fixed_token,"),
        (["recursive", "lumber"], "lumber cannot be tuned (it asks a chat model for every window"),
        (["mog"], "mog cannot be tuned (it is a retriever"),
        ([], "no family to tune; choose from fixed_token,"),
    ],
)
def test_check_families_errors_are_one_line(names, message):
    with pytest.raises(ParameterError) as err:
        check_families(names)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_family_needs():
    assert [family_needs(n) for n in ("recursive", "semantic", "ppl", "margin_sampling")] == [
        (), ("embedder",), ("lm",), ("lm",)
    ]
    with pytest.raises(ParameterError, match="unknown family 'nope'"):
        family_needs("nope")


def test_default_families_follow_the_session_models():
    chosen, left = default_families(())
    assert chosen == MODEL_FREE
    assert left[0] == LeftOut("semantic", "needs the embedder, which this session has not loaded")
    assert left[-1] == LeftOut("margin_sampling", "needs the language model, which this session has not loaded")
    assert [x.family for x in left] == [*EMBEDDER, *LM]
    chosen, left = default_families({"embedder"})
    assert chosen == ("fixed_token", "recursive", "paragraph", "semantic", "semantic_max", "cluster", "sentence")
    assert [x.family for x in left] == list(LM)
    chosen, left = default_families({"lm", "embedder"})
    assert chosen == TUNABLE and left == ()


# --- the grid ---------------------------------------------------------------------------------


def test_grid_sizes_and_every_point_is_valid():
    sizes = {name: search_space([name]).size() for name in TUNABLE}
    assert sizes == {
        "fixed_token": 55, "recursive": 55, "paragraph": 11, "semantic": 68, "semantic_max": 11, "cluster": 11,
        "sentence": 55, "ppl": 41, "ppl_combined": 55, "ppl_overlap": 41, "margin_sampling": 12,
    }
    space = search_space(TUNABLE)
    grid = space.grid()
    assert len(grid) == space.size() == sum(sizes.values())
    assert len({c.spec for c in grid}) == len(grid)
    for config in grid:
        assert _config(config.spec) == config  # the spec round-trips through the chunker's own checks
        params = config.params_dict
        if "chunk_overlap" in params:
            assert 0 <= params["chunk_overlap"] < params["chunk_size"]
    assert search_space(MODEL_FREE).size() == 176  # the model-free grid: a few hundred at most


def test_every_model_free_grid_point_chunks_a_document():
    doc = load_sample("technical")
    for config in search_space(MODEL_FREE).grid():
        chunking = run_chunker(doc, config)
        assert chunking.chunks, config.spec
        assert max(chunking.token_counts) <= config.params_dict["chunk_size"], config.spec
        assert all(doc.text[c.start:c.end] == c.text for c in chunking.chunks)


def test_grid_points_are_pinned():
    grid = search_space(["recursive"]).grid()
    assert [c.spec for c in grid[:5]] == [
        "recursive chunk_overlap=0 chunk_size=32",
        "recursive chunk_overlap=4 chunk_size=32",
        "recursive chunk_overlap=8 chunk_size=32",
        "recursive chunk_overlap=12 chunk_size=32",
        "recursive chunk_overlap=16 chunk_size=32",
    ]
    assert grid[-1].spec == "recursive chunk_overlap=512 chunk_size=1024"
    assert _config("recursive chunk_size=200 chunk_overlap=25") in grid
    ppl = search_space(["ppl"]).grid()
    assert [c.spec for c in ppl[:2]] == [
        "ppl rule=reference threshold=0.0 value=nll", "ppl rule=reference threshold=0.1 value=nll"
    ]
    assert ppl[-1].spec == "ppl rule=reference threshold=4.0 value=nll"


def test_search_space_checks_its_inputs():
    with pytest.raises(ParameterError, match="unknown family 'foo'"):
        search_space(["foo"])
    with pytest.raises(ParameterError, match="unknown tokenizer 'nope'"):
        search_space(["recursive"], tokenizer="nope")
    with pytest.raises(ParameterError, match="manual cannot be tuned"):
        SearchSpace(("recursive", "manual"))
    assert SearchSpace(("ppl", "ppl")).families == ("ppl",)
    assert search_space(["paragraph"], tokenizer="chars").grid()[0].tokenizer == "chars"


# --- suggest() with a real Optuna study ---------------------------------------------------------


def _tpe_specs(space: SearchSpace, n: int, seed: int = 0) -> list[str]:
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
    specs: list[str] = []

    def objective(trial: optuna.trial.Trial) -> float:
        config = space.suggest(trial)
        specs.append(config.spec)
        return float(len(config.spec))  # any deterministic score: the sampler's choices depend on it

    study.optimize(objective, n_trials=n)
    return specs


def test_suggest_is_seeded_and_stays_inside_the_grid():
    space = search_space([*MODEL_FREE, "ppl"])
    first = _tpe_specs(space, 40)
    assert first == _tpe_specs(space, 40)
    assert first != _tpe_specs(space, 40, seed=1)
    grid = {c.spec for c in space.grid()}
    assert set(first) <= grid
    assert len({spec.split()[0] for spec in first}) >= 3  # the family is searched too
    for spec in first:
        _config(spec)


def test_one_family_asks_no_family_param_and_trial_params_give_grid_values():
    space = search_space(["ppl"])
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    seen: list[ChunkerConfig] = []
    study.optimize(lambda t: len(seen.append(space.suggest(t)) or seen) * 0.1, n_trials=12)
    assert all(set(t.params) == {"threshold"} for t in study.trials)  # ppl_overlap declares it alike
    grid = space.grid()
    assert all(c in grid for c in seen)
    # A stepped float comes back as e.g. 2.9000000000000004: it stands for the grid's 2.9, every time.
    assert [space.suggest(optuna.trial.FixedTrial(t.params)) for t in study.trials] == seen


def test_enqueued_baseline_is_the_first_trial():
    space = search_space(MODEL_FREE)
    baseline = _config(BASELINE)
    params = space.params_of(baseline)
    assert params == {"family": "recursive", "chunk_size": 200, "chunk_overlap": 0.0}
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    study.enqueue_trial(params)
    seen: list[ChunkerConfig] = []
    study.optimize(lambda t: float(len(seen.append(space.suggest(t)) or seen)), n_trials=3)
    assert seen[0] == baseline


def test_params_of_reproduces_every_grid_point():
    space = search_space(TUNABLE)
    for config in space.grid():
        assert space.suggest(optuna.trial.FixedTrial(space.params_of(config))) == config
    one = search_space(["fixed_token"])
    cfg = _config("fixed_token chunk_size=400 chunk_overlap=100")
    assert one.params_of(cfg) == {"chunk_size": 400, "chunk_overlap": 0.25}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ppl threshold=0.5", "ppl rule=reference threshold=0.5 value=nll is not in the search space: ppl is not among the families searched "
                              "(fixed_token, recursive, paragraph, sentence)"),
        ("recursive chunk_size=300", "recursive chunk_overlap=0 chunk_size=300 is not in the search space: off the "
                                     "grid (chunk_size in 32, 50, 64, 100, 128, 200, 256, 400, 512, 800, 1024; "
                                     "chunk_overlap in 0.0, 0.125, 0.25, 0.375, 0.5 (fractions of chunk_size))"),
        ("recursive chunk_size=200 chunk_overlap=30", "off the grid"),
        ("recursive chunk_size=200 tokenizer=chars", "it counts chars tokens, the space cl100k"),
    ],
)
def test_params_of_refuses_a_config_outside_the_space(spec, message):
    with pytest.raises(ParameterError) as err:
        search_space(MODEL_FREE).params_of(_config(spec))
    assert message in str(err.value)


def test_params_of_names_an_unsearched_param():
    with pytest.raises(ParameterError, match="semantic's buffer_size is not searched \\(it stays 1\\)"):
        search_space(["semantic"]).params_of(_config("semantic amount=95 buffer_size=2"))


def test_suggest_serves_a_two_objective_study():
    space = search_space(["recursive", "paragraph"])
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=optuna.samplers.NSGAIISampler(seed=0))
    seen: list[ChunkerConfig] = []

    def objective(trial: optuna.trial.Trial) -> tuple[float, float]:
        config = space.suggest(trial)
        seen.append(config)
        return float(config.params_dict.get("chunk_overlap", 0)), float(config.params_dict["chunk_size"])

    study.optimize(objective, n_trials=30)
    grid = space.grid()
    assert all(c in grid for c in seen) and len({c.name for c in seen}) == 2


def test_the_space_imports_no_optuna():
    code = "import sys, backend, backend.tune.space, backend.tune.spec; print('optuna' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- PPL: θ searched on scores computed once ----------------------------------------------------

TEXT = (
    "The river rose in the night. By morning the bridge was gone. "
    "The mayor called a meeting. Nobody came, because the roads were flooded. "
    "Weeks later the water fell and the town began to rebuild. The new bridge opened in spring."
)


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """One scored ``ppl`` run of TEXT (the bundled model, once per module), its context and the cache."""
    doc = Document.from_text(TEXT)
    context = ModelContext(_cache=OutputCache(tmp_path_factory.mktemp("cache")))
    first = run_chunker(doc, _config("ppl threshold=0.5"), context)
    return doc, context, first


def test_a_second_threshold_makes_no_model_call(scored):
    doc, context, first = scored
    assert (first.model_time.computed, first.model_time.cached) == (1, 0)
    space = search_space(["ppl", "ppl_overlap", "ppl_combined"])
    for config in space.grid()[::7]:
        again = run_chunker(doc, config, context)
        assert (again.model_time.computed, again.model_time.cached) == (0, 1), config.spec
    # A context that refuses every model call chunks every θ just the same: the scores come from the cache.
    refusing = ModelContext.cache_only(context.get_scorer().info)
    refusing._cache = context.cache
    for config in space.grid()[::11]:
        assert run_chunker(doc, config, refusing).chunks == run_chunker(doc, config, context).chunks


def test_a_parameter_several_families_declare_alike_is_one_trial_parameter_and_sizes_are_a_log_scale():
    space = search_space(["recursive", "sentence", "ppl"])
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    study.optimize(lambda t: float(len(space.suggest(t).spec)), n_trials=30)
    names = set().union(*(t.params for t in study.trials))
    assert names == {"family", "chunk_size", "chunk_overlap", "threshold"}  # θ: ppl_overlap declares it alike
    sizes = {d.low: d for t in study.trials for k, d in t.distributions.items() if k == "chunk_size"}
    assert [(d.low, d.high, d.log) for d in sizes.values()] == [(32, 1024, True)]
    # A size between two rungs of the ladder stands for the nearer on a log scale (40 for 32, 41 for 50).
    for raw, size in ((32, 32), (40, 32), (41, 50), (1000, 1024), (700, 800)):
        fixed = optuna.trial.FixedTrial({"family": "sentence", "chunk_size": raw, "chunk_overlap": 0.0})
        assert space.suggest(fixed).params_dict["chunk_size"] == size
