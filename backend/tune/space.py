"""The search space of a tuning run: which chunkers, and which values of their parameters.

Each chunker declares the range a tuner searches on its own :class:`~backend.chunkers.base.Param`
(``Param.search``, a :class:`~backend.chunkers.base.Search`); this module only reads those
declarations, so a range is written once, next to the parameter it belongs to. A "family" is a
registered chunker name (``recursive``, ``ppl``…); a parameter without a ``search`` keeps its default.

A :class:`SearchSpace` gives the same points two ways: :meth:`SearchSpace.suggest` asks an Optuna
trial for one (define-by-run: a categorical ``family``, then each searched parameter) and
:meth:`SearchSpace.grid` lists them all, so the tuner and an exhaustive grid search search exactly
the same configurations. Every declared range is finite (a step or choices), and an overlap is
searched as a fraction of the chunk size (``Search.of``), so every point is a valid configuration.

What the sampler is told, so that what it learns carries over (:func:`trial_param`):

- A parameter declared with the same type and range by several families is one trial parameter
  (``chunk_size``, ``chunk_overlap``): 32 tokens is the same chunk size for ``recursive`` and
  ``sentence``, and a sampler that found it good in one family tries it first in the next. Any
  other parameter is ``{family}.{param}`` (``semantic.amount``).
- Choices that are all positive whole numbers (the chunk-size ladder 32…1024) are an ordered,
  log-spaced scale, not unordered labels: they are asked as a log-scale integer between the
  smallest and the largest and read as the nearest choice on that scale, so "50 did well" also
  speaks for 32 and 64. Choices with a 0 ("no cap") or fewer than three stay categorical.

Measured (2026-11-29, the technical sample's 120 model-free questions: every configuration's
per-question IoU scored once, then the tuner's own loop run on those scores with 12 sampler seeds,
as ``bench/bench_tune.py --replay-seeds 12`` does): at 25 trials a run the pick's held-out IoU was
within 5% of the exhaustive grid's pick's in 10 of 12 seeds, against 5 of 12 with a name per family
and categorical sizes; at 16 trials (a fifth of the grid's time on a busy machine), 8 of 12.

Optuna is not imported here: :meth:`SearchSpace.suggest` only calls the trial it is given, so
``import backend`` (and this module) stays free of it.

PPL families (``ppl``, ``ppl_overlap``, ``ppl_combined``): the per-sentence scores are computed
once and θ is searched on them. Nothing extra is needed for that: a PPL chunker reads the
document's token scores through :meth:`~backend.chunkers.context.ModelContext.token_scores`, which
serves them from the output cache (:mod:`backend.models.cache`) after the first scoring pass, and
the cut at another θ is pure Python. Measured (2026-11-29, 2 shared CPU cores, bundled SmolLM2,
the bundled ``technical`` sample, 201 sentences): the first ``ppl threshold=0.5`` through
:func:`backend.chunkers.run_chunker` took 39.6 s (32.2 s of it scoring); then each of 10 θ from 0
to 3 took 3.8-5.4 ms (median 4.2 ms) for ``ppl``, 4.1 ms for ``ppl_overlap`` and 4.2 ms for
``ppl_combined``, every chunking's ``model_time`` saying 0 computed, 1 cached, also with a fresh
:class:`~backend.chunkers.context.ModelContext` on the same cache (4.4 ms).
``tests/backend/tune/test_space.py`` checks that a second θ makes no model call.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from backend.chunkers import REGISTRY, make_chunker
from backend.chunkers.base import Param, Search
from backend.chunking import ChunkerConfig
from backend.errors import ParameterError
from backend.tune.types import LeftOut

if TYPE_CHECKING:  # only for the annotation: the tuner passes the trial in
    import optuna

__all__ = [
    "BASELINE",
    "NOT_TUNABLE",
    "TUNABLE",
    "SearchSpace",
    "check_families",
    "default_families",
    "family_needs",
    "search_space",
    "trial_param",
    "tunable_families",
]

# The configuration a pick is compared with unless the user names one (the Chroma report's recursive 200).
BASELINE = "recursive chunk_size=200 chunk_overlap=0"

# Why a registered chunker declares no search range (a chunker not listed here and without a range:
# "it declares no search range").
NOT_TUNABLE: Mapping[str, str] = {
    "manual": "its cuts are edits made by hand on one document; tune the configuration it was edited from",
    "llm_split": "it asks a chat model for every window of the document; a search would repeat that per trial",
    "lumber": "it asks a chat model for every window of the document; a search would repeat that per trial",
    "moc": "it asks a chat model for every window of the document; a search would repeat that per trial",
    "mog": "it is a retriever over several granularities, not one chunking to score",
    "mogg": "it is a retriever over a graph of sentences, not one chunking to score",
    "freechunker": "it is a retriever over several granularities, not one chunking to score",
}

# How a missing model is named in a one-line reason.
_MODEL_NAMES = {"lm": "the language model", "embedder": "the embedder", "chat": "a chat model"}


def _searched(family: str) -> tuple[tuple[Param, Search], ...]:
    """The parameters of ``family`` a tuner searches, with their ranges, in declaration order."""
    return tuple((p, p.search) for p in REGISTRY[family].params if p.search is not None)


def _defaults(family: str) -> dict[str, Any]:
    return {p.name: p.default for p in REGISTRY[family].params}


def tunable_families() -> tuple[str, ...]:
    """Every registered chunker with at least one searched parameter, in registry order."""
    return tuple(name for name in REGISTRY if _searched(name))


TUNABLE: tuple[str, ...] = tunable_families()


def check_families(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` checked as families to tune, without repeats, in the order given.

    Raises:
        ParameterError: (one line) an unknown name, a chunker that cannot be tuned, or no name at all.
    """
    tunable = tunable_families()
    choose = ", ".join(tunable)
    out: list[str] = []
    for raw in names:
        name = str(raw).strip()
        if name not in REGISTRY:
            raise ParameterError(f"unknown family {name!r}; choose from {choose}")
        if name not in tunable:
            why = NOT_TUNABLE.get(name, "it declares no search range")
            raise ParameterError(f"{name} cannot be tuned ({why}); choose from {choose}")
        if name not in out:
            out.append(name)
    if not out:
        raise ParameterError(f"no family to tune; choose from {choose}")
    return tuple(out)


def family_needs(name: str) -> tuple[str, ...]:
    """The models ``name``'s chunker runs (``("lm",)``, ``("embedder",)``; () for a model-free one).

    Raises:
        ParameterError: ``name`` is not a registered chunker.
    """
    if name not in REGISTRY:
        raise ParameterError(f"unknown family {name!r}; choose from {', '.join(tunable_families())}")
    return tuple(REGISTRY[name].needs)


def default_families(available: Collection[str]) -> tuple[tuple[str, ...], tuple[LeftOut, ...]]:
    """The families a run searches when the user names none, and those left out with why.

    Args:
        available: The models this session can run (``"lm"``, ``"embedder"``…).

    Returns:
        The model-free families and every model-backed one whose models are all available (registry
        order); and a :class:`LeftOut` for each other tunable family, e.g. ``ppl``: "needs the
        language model, which this session has not loaded".
    """
    have = set(available)
    chosen: list[str] = []
    left: list[LeftOut] = []
    for name in tunable_families():
        missing = [m for m in family_needs(name) if m not in have]
        if not missing:
            chosen.append(name)
            continue
        what = " and ".join(_MODEL_NAMES.get(m, m) for m in missing)
        left.append(LeftOut(name, f"needs {what}, which this session has not loaded"))
    return tuple(chosen), tuple(left)


def _shared(name: str, param: Param, search: Search) -> bool:
    """Whether another tunable family searches a parameter ``name`` of the same type over the same range."""
    return sum(1 for family in tunable_families() for p, s in _searched(family)
               if p.name == name and p.type == param.type and s == search) >= 2


def trial_param(family: str, param: Param, search: Search) -> str:
    """The name a trial asks ``family``'s ``param`` by: ``param.name`` when shared (see the module docstring)."""
    return param.name if _shared(param.name, param, search) else f"{family}.{param.name}"


def _ordinal(param: Param, search: Search) -> bool:
    """Whether ``search``'s choices are asked as a log-scale integer (positive whole numbers, three or more)."""
    values = search.choices or ()
    return (param.type == "int" and len(values) >= 3
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values))


def _grid_values(param: Param, search: Search) -> tuple[Any, ...]:
    """The values of ``search`` as the trial gives them (a fraction for ``of``, else ``param``'s type)."""
    if search.of is not None:
        return tuple(float(v) for v in search.values())
    return tuple(param.coerce(v) for v in search.values())


def _resolve(family: str, point: Mapping[str, Any]) -> dict[str, Any]:
    """The chunker parameters of a point (searched name → trial value): fractions turned into values."""
    params: dict[str, Any] = {}
    for p, search in _searched(family):
        value = point[p.name]
        if search.of is not None:
            base = params[search.of] if search.of in params else _defaults(family)[search.of]
            value = int(math.floor(value * base + 0.5)) if p.type == "int" else value * base
        params[p.name] = value
    return params


def _nearest(value: Any, grid: tuple[Any, ...], log: bool = False) -> Any:
    """The grid value a sampled one stands for (a stepped float may come back as 0.30000000000000004).

    With ``log`` (an ordinal ladder of positive values) the nearest on a log scale: 40 stands for 32, 41 for 50.
    """
    if value in grid:
        return grid[grid.index(value)]
    if log:
        return min(grid, key=lambda g: abs(math.log(float(g)) - math.log(float(value))))
    return min(grid, key=lambda g: abs(float(g) - float(value)))


@functools.lru_cache(maxsize=64)
def _family_grid(family: str, tokenizer: str) -> tuple[tuple[ChunkerConfig, tuple[Any, ...]], ...]:
    """Every configuration of ``family``'s grid with the trial values of its first point (deduplicated by spec)."""
    params = _searched(family)
    seen: dict[str, tuple[ChunkerConfig, tuple[Any, ...]]] = {}
    for values in itertools.product(*(_grid_values(p, search) for p, search in params)):
        point = dict(zip((p.name for p, _ in params), values))
        config = make_chunker(family, _resolve(family, point), tokenizer).config
        seen.setdefault(config.spec, (config, values))
    return tuple(seen.values())


@dataclass(frozen=True)
class SearchSpace:
    """The configurations a tuning run may try: the searched parameters of ``families``.

    Its families are checked on construction (:func:`check_families`, repeats dropped); :func:`search_space`
    also builds the grid once, so a bad tokenizer fails there.

    Attributes:
        families: Registered chunker names, each with at least one searched parameter.
        tokenizer: The tokenizer every configuration counts tokens with.
    """

    families: tuple[str, ...]
    tokenizer: str = "cl100k"

    def __post_init__(self) -> None:
        object.__setattr__(self, "families", check_families(self.families))  # checked, without repeats

    def suggest(self, trial: optuna.trial.Trial) -> ChunkerConfig:
        """The configuration ``trial`` picks (define-by-run; the same trial params always give the same one).

        A categorical ``family`` (not asked when the space has one family), then each searched
        parameter by its :func:`trial_param` name: a log-scale integer for a ladder of whole-number
        choices, a categorical for other choices, a stepped int or float for a range (a log scale
        where declared). An overlap is asked as a fraction of its chunk size.
        """
        family = self.families[0] if len(self.families) == 1 else trial.suggest_categorical("family", self.families)
        point: dict[str, Any] = {}
        for p, search in _searched(family):
            name = trial_param(family, p, search)
            grid = _grid_values(p, search)
            if _ordinal(p, search):
                raw = trial.suggest_int(name, int(min(grid)), int(max(grid)), log=True)
                point[p.name] = _nearest(raw, grid, log=True)
                continue
            if search.choices is not None:
                value = trial.suggest_categorical(name, grid)
            elif p.type == "int" and search.of is None:
                # Declared ranges of int parameters are whole numbers (checked by their coerce in the tests).
                value = trial.suggest_int(name, int(grid[0]), int(grid[-1]), step=int(search.step or 1),
                                          log=search.log)
            else:
                value = trial.suggest_float(name, float(grid[0]), float(grid[-1]),
                                            step=None if search.log else float(search.step or 1), log=search.log)
            point[p.name] = _nearest(value, grid)
        return make_chunker(family, _resolve(family, point), self.tokenizer).config

    def grid(self) -> tuple[ChunkerConfig, ...]:
        """Every configuration :meth:`suggest` can return, each once, family by family (all valid)."""
        return tuple(config for family in self.families for config, _ in _family_grid(family, self.tokenizer))

    def size(self) -> int:
        """How many configurations the space holds (``len(self.grid())``)."""
        return sum(len(_family_grid(family, self.tokenizer)) for family in self.families)

    def params_of(self, config: ChunkerConfig) -> dict[str, Any]:
        """The trial params that make :meth:`suggest` return ``config`` (for Optuna's ``enqueue_trial``).

        Raises:
            ParameterError: ``config`` is not a point of this space (another family or tokenizer,
                a value off the grid, or an unsearched parameter away from its default).
        """
        if config.name not in self.families:
            raise ParameterError(
                f"{config.spec} is not in the search space: {config.name} is not among the families searched "
                f"({', '.join(self.families)})"
            )
        if config.tokenizer != self.tokenizer:
            raise ParameterError(
                f"{config.spec} is not in the search space: it counts {config.tokenizer} tokens, the space "
                f"{self.tokenizer}"
            )
        family = config.name
        normal = make_chunker(family, config.params_dict, config.tokenizer).config
        for config_i, values in _family_grid(family, self.tokenizer):
            if config_i == normal:
                out: dict[str, Any] = {} if len(self.families) == 1 else {"family": family}
                out.update({trial_param(family, p, search): v for (p, search), v in zip(_searched(family), values)})
                return out
        searched = {p.name for p, _ in _searched(family)}
        defaults = _defaults(family)
        off = [k for k, v in normal.params_dict.items() if k not in searched and v != defaults[k]]
        if off:
            raise ParameterError(
                f"{config.spec} is not in the search space: {family}'s {off[0]} is not searched (it stays "
                f"{defaults[off[0]]!r})"
            )
        ranges = "; ".join(f"{p.name} in {', '.join(map(str, _grid_values(p, search)))}"
                           + (f" (fractions of {search.of})" if search.of else "")
                           for p, search in _searched(family))
        raise ParameterError(f"{config.spec} is not in the search space: off the grid ({ranges})")


def search_space(families: Sequence[str], tokenizer: str = "cl100k") -> SearchSpace:
    """The :class:`SearchSpace` of ``families`` (checked: see :func:`check_families`) counted with ``tokenizer``.

    Raises:
        ParameterError: a bad family (one line), or a tokenizer no chunker accepts.
    """
    space = SearchSpace(check_families(families), tokenizer)
    space.size()  # builds every configuration once: a bad tokenizer fails here, not mid-run
    return space
