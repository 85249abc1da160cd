"""Every page setting a session keeps: its section and name, type, default, range or choices — written once.

A page's widgets take their range, choices and default from here, a saved session writes and
checks them by these names (``quality.K``, ``ppl.threshold``…), and the Summary reads another
page's settings through them, so a slider's range or a list of choices is never copied. Where
a setting is a chunker's own parameter (θ, the PPL rule and value, a target length) or a
metric's, its :class:`~backend.chunkers.base.Param` comes from that chunker or metric, so the
page cannot offer what the chunker would refuse.

A setting whose default is ``None`` has no value of its own until the user gives one: θ's
default is the default of whichever PPL chunker the page's other settings choose (``ppl``'s
0.5, ``ppl_combined``'s 0), read by :mod:`backend.lab.ppl`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping

from backend.chunkers import REGISTRY
from backend.chunkers.base import Param
from backend.errors import ParameterError
from backend.lab.compare import DEFAULT_WINDOW, WINDOW_CHOICES
from backend.metrics.cost import DEFAULT_METRICS, DEFAULT_PAIR_WINDOW
from backend.metrics.formulas import BC_MODES, CS_RULES, DEFAULT_K
from backend.metrics.report import METRICS
from backend.samples import list_question_sets
from backend.tokenizers import TOKENIZER_NAMES

__all__ = [
    "Setting",
    "SETTINGS",
    "SECTIONS",
    "setting",
    "settings_of",
    "checked_settings",
    "QUESTION_SOURCES",
    "GRAPHS",
    "MARGIN_UNITS",
    "HISTOGRAM_UNITS",
    "K_GRID",
    "iter_settings",
]


@dataclass(frozen=True)
class Setting:
    """One setting of one page.

    Attributes:
        section: The page it belongs to (``quality``, ``ppl``, ``compare``, ``retrieval``,
            ``benchmark``, ``summary``): the first part of its saved name.
        param: Its name, type, default, help and range or choices (the chunker registry's
            :class:`~backend.chunkers.base.Param`, so a chunker's own parameter is that very object).
        many: A list of distinct choices (a multiselect) rather than one value.
        step: A slider's or number input's step (None: the widget's own).
    """

    section: str
    param: Param
    many: bool = False
    step: float | None = None

    @property
    def name(self) -> str:
        """The setting's name inside its section (``K``, ``threshold``…)."""
        return self.param.name

    @property
    def path(self) -> str:
        """``section.name``: how a saved session and messages name it."""
        return f"{self.section}.{self.name}"

    @property
    def default(self) -> Any:
        """The value before the user sets one (a list for ``many``; None: none of its own, see the module doc)."""
        return list(self.param.default) if self.many else self.param.default

    @property
    def choices(self) -> tuple[Any, ...]:
        """The allowed values of a choice setting (empty for a number or a flag)."""
        return tuple(self.param.choices or ())

    @property
    def low(self) -> float | None:
        """The smallest allowed number (None: unbounded)."""
        return self.param.min

    @property
    def high(self) -> float | None:
        """The largest allowed number (None: unbounded)."""
        return self.param.max

    @property
    def help(self) -> str:
        """What it does, in a sentence or two (the widget's help)."""
        return self.param.help

    def check(self, value: Any) -> Any:
        """``value`` as this setting holds it (coerced, in range, one of the choices).

        A saved session was written by anyone: a value of another type is refused, not converted
        (``"0.5"`` is not θ), so a hand-edited file cannot give a widget a value it would reject.

        Raises:
            ParameterError: naming the setting and the bad value.
        """
        if value is None and self.param.default is None:
            return None
        if self.many:
            if not isinstance(value, (list, tuple)) or len(set(value)) != len(value):
                raise ParameterError(f"{self.path} must be a list of distinct values, got {value!r}")
            return [self._one(v) for v in value]
        return self._one(value)

    def _one(self, value: Any) -> Any:
        kind = self.param.type
        wrong = (
            (kind == "bool" and not isinstance(value, bool))
            or (kind == "int" and (isinstance(value, bool) or not isinstance(value, int)))
            or (kind == "float" and (isinstance(value, bool) or not isinstance(value, (int, float))))
            or (kind == "str" and not isinstance(value, str))
        )
        if wrong:
            raise ParameterError(f"{self.path} must be {kind}, got {value!r}")
        return self.param.coerce(value, self.section)

    def valid(self, value: Any) -> bool:
        """Whether :meth:`check` accepts ``value``."""
        try:
            self.check(value)
        except ParameterError:
            return False
        return True


def _chunker_param(chunker: str, parameter: str, **changes: Any) -> Param:
    """A registered chunker's parameter (optionally with another name, default or range for the page)."""
    param = next((p for p in REGISTRY[chunker].params if p.name == parameter), None)
    if param is None:
        raise KeyError(f"{chunker} has no parameter {parameter}")
    return replace(param, **changes) if changes else param


QUESTION_SOURCES = ("Session set", "Bundled sample set", "Import", "Generated")
GRAPHS = ("complete", "incomplete")
MARGIN_UNITS = ("chunk", "sentence")
HISTOGRAM_UNITS = ("tokens", "characters")
K_GRID = tuple(round(0.05 * i, 2) for i in range(31))  # the K values of the CS-against-K chart: 0 … 1.5

_K = Param("K", "float", DEFAULT_K, "CS keeps an edge between two chunks when its value is above K. Larger K: fewer "
           "edges, lower CS.", min=0.0, max=1.5)
_TARGET = _chunker_param(
    "ppl_combined", "target_length", default=0, min=0,
    help="0: plain meta-chunks (ppl). Above 0: dynamic combination (ppl_combined) — adjacent meta-chunks merged "
    "while a chunk stays within this many tokens; a longer meta-chunk stands alone.",
)

SETTINGS: tuple[Setting, ...] = (
    # Quality (and the Summary's BC, CS and DS, computed under these).
    Setting("quality", Param("metrics", "str", DEFAULT_METRICS, "BC needs the adjacent pairs only; CS needs every "
                             "ordered pair (n² model passes: hours on a CPU without a pair window); DS needs the "
                             "embedder. BC and DS by default: minutes on a CPU.", choices=METRICS), many=True),
    Setting("quality", Param("window", "int", DEFAULT_PAIR_WINDOW, "An approximation for the CPU: score only the "
                             "pairs with |i − j| ≤ w; pairs further apart count as not sticky (no edge). 0 scores "
                             f"every pair, as the paper does (n² passes). {DEFAULT_PAIR_WINDOW} by default.",
                             min=0, max=10_000), step=1),
    Setting("quality", _K, step=0.01),
    Setting("quality", Param("cs_rule", "str", "paper", "paper (eq. 2): edge = (ppl(q) − ppl(q|d)) / ppl(q) > K. "
                             "reference (the authors' code): ppl(q|d) / ppl(q) > K.", choices=CS_RULES)),
    Setting("quality", Param("bc_mode", "str", "reference", "reference (the authors' code, their published table): "
                             "mean NLL of q given d ÷ mean NLL of q. paper (eq. 1): ppl(q|d) ÷ ppl(q).",
                             choices=BC_MODES)),
    Setting("quality", Param("delta", "int", 0, "The incomplete graph keeps only edges from chunk i to chunk j with "
                             "j − i > δ.", min=0, max=1_000), step=1),
    Setting("quality", Param("graph", "str", "complete", "Which stickiness graph to draw.", choices=GRAPHS)),
    Setting("quality", Param("show_graphs", "bool", True, "Draw each configuration's stickiness graph.")),
    # Meta-Chunking: the PPL chunkers' own parameters, and the page's view.
    Setting("ppl", _chunker_param("ppl", "threshold", default=None)),
    Setting("ppl", _chunker_param("ppl", "rule")),
    Setting("ppl", _chunker_param("ppl", "value", help="NLL: each sentence's mean token NLL (the authors' code). PPL: "
                                  "its exponential (the paper's notation). The minima are the same; the drops, and so "
                                  "θ, are on another scale.")),
    Setting("ppl", Param("tokenizer", "str", "cl100k", "Counts chunk sizes and the target length (the model's own "
                         "tokens only score).", choices=TOKENIZER_NAMES)),
    Setting("ppl", _TARGET, step=10),
    Setting("ppl", Param("overlap", "bool", False, "ppl_overlap: the sentence at a boundary ends one chunk and also "
                         "opens the next (section 4.2.1). Not combined with a target length.")),
    Setting("ppl", Param("guide", "bool", True, "Show the drops histogram and the θ → chunks curve.")),
    Setting("ppl", Param("aim", "int", 200, "The mean chunk length (tokens) to aim θ at.", min=1, max=1_000_000), step=10),
    Setting("ppl", _chunker_param("margin_sampling", "unit", name="margin_unit")),
    # Compare.
    Setting("compare", Param("show_strip", "bool", True, "Draw the boundary strip (tens of thousands of chunks take "
                             "the browser a few seconds).")),
    Setting("compare", Param("show_curves", "bool", True, "Draw what each configuration with a curve cut on.")),
    Setting("compare", Param("hist_unit", "str", "tokens", "Measure chunk sizes in tokens or characters.",
                             choices=HISTOGRAM_UNITS)),
    Setting("compare", Param("window_chars", "int", DEFAULT_WINDOW, "Characters of the text shown side by side at "
                             "once.", choices=WINDOW_CHOICES)),
    # Retrieval.
    Setting("retrieval", Param("k", "int", 5, "Chunks (entries, runs) each configuration returns.", min=1, max=50), step=1),
    # Benchmark (and the Summary's benchmark, run as the Benchmark page would).
    Setting("benchmark", Param("source", "str", QUESTION_SOURCES[0], "Where the question set comes from.",
                               choices=QUESTION_SOURCES)),
    Setting("benchmark", Param("sample", "str", None, "A bundled sample's question set.")),
    Setting("benchmark", Param("retrieve", "int", 5, "Chunks retrieved per question.", min=1, max=100), step=1),
    Setting("benchmark", Param("auto", "bool", False, "Retrieve as many chunks as hold excerpts (the reference's "
                               "retrieve=-1).")),
    Setting("benchmark", Param("cross", "bool", True, "Retrieve from every corpus of the set, as the reference does "
                               "(off: the question's own corpus).")),
    # Summary.
    Setting("summary", Param("show_charts", "bool", True, "Draw the boundary strip and the chunk-size histograms.")),
)
SECTIONS = tuple(dict.fromkeys(s.section for s in SETTINGS))
_BY_PATH = {s.path: s for s in SETTINGS}


def setting(section: str, name: str) -> Setting:
    """The setting ``section.name``.

    Raises:
        KeyError: no such setting (a programming error, not user input).
    """
    found = _BY_PATH.get(f"{section}.{name}")
    if found is None:
        raise KeyError(f"no setting {section}.{name}")
    if found.path == "benchmark.sample":
        # The bundled question sets are only known at run time (their names are the choices).
        return replace(found, param=replace(found.param, choices=tuple(q.name for q in list_question_sets())))
    return found


def settings_of(section: str) -> tuple[Setting, ...]:
    """Every setting of one page, in the order above."""
    return tuple(setting(s.section, s.name) for s in SETTINGS if s.section == section)


def _legacy(section: str, name: str) -> str:
    """A name an earlier session file used for a setting (θ was saved as ``ppl.theta``), as it is called now."""
    return {("ppl", "theta"): "threshold"}.get((section, name), name)


def checked_settings(raw: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The settings a saved session holds, by section, keeping only the known and valid ones.

    Args:
        raw: ``{section: {name: value}}`` as read from a session file (anything else is ignored).

    Returns:
        ``(settings, dropped)``: the valid values by section and name, and ``section.name`` of
        each value that was refused (unknown, or of the wrong type or range).
    """
    out: dict[str, dict[str, Any]] = {}
    dropped: list[str] = []
    for section, group in raw.items():
        if section not in SECTIONS or not isinstance(group, Mapping):
            continue
        for name, value in group.items():
            key = _legacy(section, str(name))
            try:
                spec = setting(section, key)
                out.setdefault(section, {})[key] = spec.check(value)
            except (KeyError, ParameterError):
                dropped.append(f"{section}.{name}")
    return out, dropped


def iter_settings() -> Iterator[Setting]:
    """Every setting, choices resolved (see :func:`setting`)."""
    for s in SETTINGS:
        yield setting(s.section, s.name)
