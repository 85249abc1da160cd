"""The chunker base class, parameter specs and the registry.

A chunker declares its ``name``, ``family``, ``params`` and a docstring, and implements one
method, :meth:`Chunker.split`, returning exact spans. Timing, parameter validation, token
counting and span validation are written once here. The app's sidebar forms and the CLI
flags are generated from :data:`REGISTRY`.
"""

from __future__ import annotations

import inspect
import math
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Sequence

from backend.chunkers.context import ModelContext
from backend.chunking import Chunk, ChunkerConfig, Chunking
from backend.curves import Curve
from backend.errors import ParameterError
from backend.models.timing import model_time_ledger
from backend.text.document import Document
from backend.tokenizers import Tokenizer, get_tokenizer

__all__ = [
    "Search", "Param", "TOKEN_LENGTHS", "OVERLAP_FRACTIONS", "Chunker", "size_params", "REGISTRY", "register", "make_chunker", "config_needs", "run_chunker",
    "chunker_specs",
]

_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


@dataclass(frozen=True)
class Search:
    """The range a tuner searches for one :class:`Param` (read by ``backend.tune.space``).

    Either ``choices`` (the values themselves) or ``low``/``high``/``step`` (every value
    ``low + k * step`` up to ``high``), so every search space has a finite exhaustive grid.
    ``log`` asks the sampler for a log scale (Optuna allows it only with ``step`` 1 on integers;
    the grid is then every integer). ``of`` makes the values fractions of another, earlier
    parameter of the same chunker: the configuration gets ``round(fraction * that value)``,
    so a relation such as ``chunk_overlap < chunk_size`` holds at every point of the grid.
    The ranges lie within the :class:`Param`'s own ``min``/``max``/``choices`` (checked by
    ``tests/backend/tune/test_space.py``); for ``of`` the fractions lie in [0, 1).

    Raises:
        ValueError: neither choices nor a stepped range, or a malformed one (a bug in a declaration).
    """

    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: tuple[Any, ...] | None = None
    of: str | None = None

    def __post_init__(self) -> None:
        if self.choices is not None:
            if not self.choices or any(x is not None for x in (self.low, self.high, self.step)):
                raise ValueError("Search: give choices, or low, high and step, not both")
            if len(set(self.choices)) != len(self.choices):
                raise ValueError(f"Search: repeated choices {self.choices!r}")
            if self.log:
                raise ValueError("Search: log applies to a range, not to choices")
            return
        if self.low is None or self.high is None or self.step is None:
            raise ValueError("Search: a range needs low, high and step (the grid must be finite)")
        if not (self.step > 0 and self.low <= self.high):
            raise ValueError(f"Search: bad range low={self.low} high={self.high} step={self.step}")
        if self.log and (self.step != 1 or self.low <= 0):
            raise ValueError("Search: log needs step 1 and a positive low (Optuna's rule)")

    def values(self) -> tuple[Any, ...]:
        """Every value of the grid, in order (a stepped range: ``low``, ``low + step``, … ≤ ``high``)."""
        if self.choices is not None:
            return tuple(self.choices)
        low, high, step = float(self.low or 0), float(self.high or 0), float(self.step or 1)  # set: __post_init__
        n = int(math.floor((high - low) / step + 1e-9)) + 1
        if all(x.is_integer() for x in (low, high, step)):
            return tuple(int(low) + k * int(step) for k in range(n))
        # Rounded, so 0.1 * 3 is the 0.3 a person writes (a sampler's value is snapped to these points).
        return tuple(round(low + k * step, 10) for k in range(n))

    def to_json(self) -> dict[str, Any]:
        """A JSON description for the CLI and the app."""
        return {
            "low": self.low,
            "high": self.high,
            "step": self.step,
            "log": self.log,
            "choices": list(self.choices) if self.choices is not None else None,
            "of": self.of,
        }


@dataclass(frozen=True)
class Param:
    """One chunker parameter: its type, default, allowed range or choices, and help text."""

    name: str
    type: str  # "int" | "float" | "str" | "bool"
    default: Any
    help: str
    min: float | None = None
    max: float | None = None
    choices: tuple[Any, ...] | None = None
    search: Search | None = None  # the range a tuner searches (None: the tuner keeps the default)

    def coerce(self, value: Any, chunker: str = "") -> Any:
        """Convert ``value`` (possibly a CLI string) to this parameter's type and check its range.

        Raises:
            ParameterError: naming the parameter and the bad value.
        """
        where = f"{chunker}: " if chunker else ""
        kind = _TYPES[self.type]
        try:
            if kind is bool:
                if isinstance(value, str):
                    low = value.strip().lower()
                    if low not in {"true", "false", "1", "0", "yes", "no"}:
                        raise ValueError(value)
                    out: Any = low in {"true", "1", "yes"}
                else:
                    out = bool(value)
            elif kind is int:
                if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                    raise ValueError(value)
                out = int(value) if not isinstance(value, str) else int(value.strip())
            elif kind is float:
                out = float(value)
                if out != out:  # NaN
                    raise ValueError(value)
            else:
                out = str(value)
        except (TypeError, ValueError) as e:
            raise ParameterError(f"{where}{self.name} must be {self.type}, got {value!r}") from e
        if self.choices is not None and out not in self.choices:
            opts = ", ".join(map(str, self.choices))
            raise ParameterError(f"{where}{self.name} must be one of {opts}, got {out!r}")
        if self.min is not None and out < self.min:
            raise ParameterError(f"{where}{self.name} ({out}) must be at least {self.min:g}")
        if self.max is not None and out > self.max:
            raise ParameterError(f"{where}{self.name} ({out}) must be at most {self.max:g}")
        return out

    def to_json(self) -> dict[str, Any]:
        """A JSON description for the CLI and the app."""
        return {
            "name": self.name,
            "type": self.type,
            "default": self.default,
            "min": self.min,
            "max": self.max,
            "choices": list(self.choices) if self.choices is not None else None,
            "help": self.help,
            "search": self.search.to_json() if self.search is not None else None,
        }


class Chunker(ABC):
    """Base class of every chunker. Subclasses implement :meth:`split` only."""

    name: ClassVar[str]
    family: ClassVar[str]
    params: ClassVar[tuple[Param, ...]] = ()
    needs: ClassVar[tuple[str, ...]] = ()  # models it runs: ("lm",) for a language model
    # The parameter that sets chunk length, tuned by "match lengths" (None: chunk_size if it has one).
    length_param: ClassVar[str | None] = None

    @classmethod
    def length_parameter(cls) -> Param | None:
        """The :class:`Param` that controls chunk length (larger value, longer chunks), if any."""
        name = cls.length_param or "chunk_size"
        return next((p for p in cls.params if p.name == name), None)

    def __init__(self, tokenizer: str | Tokenizer = "cl100k", **params: Any) -> None:
        self.tokenizer: Tokenizer = get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
        known = {p.name: p for p in self.params}
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ParameterError(
                f"{self.name}: unknown parameter {unknown[0]!r}; known: {', '.join(known) or 'none'}"
            )
        self.values: dict[str, Any] = {
            p.name: p.coerce(params[p.name], self.name) if p.name in params else p.default for p in self.params
        }
        self.context = ModelContext()
        self.validate()

    def validate(self) -> None:
        """Check relations between parameters; raise :class:`ParameterError`.

        The base checks that ``chunk_overlap`` is smaller than ``chunk_size`` wherever a
        chunker has both; override (and call ``super()``) for more.
        """
        size, overlap = self.values.get("chunk_size"), self.values.get("chunk_overlap")
        if size is not None and overlap is not None and overlap >= size:
            raise ParameterError(f"chunk_overlap ({overlap}) must be smaller than chunk_size ({size})")

    @classmethod
    def needs_for(cls, params: dict[str, Any], tokenizer: str = "cl100k") -> tuple[str, ...]:
        """The models this chunker runs with ``params``: its ``needs`` (an edited copy: its base's)."""
        return cls.needs

    @classmethod
    def has_curve(cls) -> bool:
        """Whether this chunker draws a curve: it overrides :meth:`curve`."""
        return cls.curve is not Chunker.curve

    def curve(self, doc: Document, context: ModelContext | None = None) -> Curve | None:
        """What this chunker cuts ``doc`` on: its values, threshold and chunk ends (None: no curve).

        The extension point of the app's curve view: a chunker that compares a value with a
        threshold (perplexity, margin, embedding distance) overrides this and returns a
        :class:`~backend.curves.Curve` whose ``boundaries`` are exactly where :meth:`chunk`
        ends chunks. It computes nothing the chunker did not: it reads the same model outputs
        through ``context``'s cache, so calling it after :meth:`chunk` makes no model call,
        and a cache-only context raises the same error chunking would.

        Args:
            doc: The document.
            context: As for :meth:`chunk` (None: keep this chunker's context).
        """
        return None

    @property
    def config(self) -> ChunkerConfig:
        """This chunker's configuration (name, parameter values, tokenizer name)."""
        return ChunkerConfig.make(self.name, self.values, self.tokenizer.name)

    @abstractmethod
    def split(self, doc: Document) -> Sequence[tuple[int, int, int]]:
        """Cut ``doc.text`` into chunks.

        Returns:
            ``(start, end, tokens)`` for each chunk, ordered by start. ``tokens`` is the token
            count of ``doc.text[start:end]`` (use :meth:`with_counts` when you did not count).
        """

    def with_counts(self, text: str, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]]:
        """Attach token counts to spans, counting in one batch."""
        counts = self.tokenizer.count_many([text[s:e] for s, e in spans])
        return [(s, e, n) for (s, e), n in zip(spans, counts)]

    def chunk(self, doc: Document, context: ModelContext | None = None) -> Chunking:
        """Run the chunker on ``doc`` and return validated, timed chunks.

        Args:
            doc: The document.
            context: The model, cache and progress for chunkers that ``need`` a model
                (default: the bundled model, the default cache, no progress); ignored by others.
        """
        if context is not None:
            self.context = context
        return self.chunk_with(doc, self.split)

    def chunk_with(self, doc: Document, split: Callable[[Document], Sequence[tuple[int, int, int]]]) -> Chunking:
        """Chunk ``doc`` with ``split`` in place of :meth:`split`: timed and checked exactly as :meth:`chunk`.

        For a chunker that can also cut from model outputs computed earlier (the PPL page's
        cached per-sentence values, margin sampling's decisions): its :meth:`split` and that
        re-cut both end here, so they give the same validated :class:`Chunking`.

        Args:
            doc: The document.
            split: Returns ``(start, end, tokens)`` per chunk of ``doc``, as :meth:`split` does.

        Raises:
            AssertionError: a span is out of the text or out of order (a bug in the chunker).
        """
        t0 = time.perf_counter()
        with model_time_ledger() as ledger:
            pieces = split(doc)
        elapsed = time.perf_counter() - t0
        text = doc.text
        n = len(text)
        chunks: list[Chunk] = []
        prev_start = -1
        for i, (s, e, tokens) in enumerate(pieces):
            if not (0 <= s < e <= n) or s < prev_start:
                raise AssertionError(f"{self.name} produced an invalid span [{s}, {e}) (text length {n})")
            prev_start = s
            chunks.append(Chunk(index=i, start=s, end=e, text=text[s:e], tokens=int(tokens)))
        model_time = ledger.result() if self.needs else None
        return Chunking(config=self.config, chunks=tuple(chunks), elapsed_s=elapsed, doc_id=doc.id, doc_length=n,
                        model_time=model_time)


# The chunk lengths (tokens) a tuner tries wherever a chunker has a token-length parameter: 32 to 1024 on a
# roughly geometric grid (powers of two and the Chroma report's 50, 100, 200, 400, 800; the default 200 is on it).
TOKEN_LENGTHS = Search(choices=(32, 50, 64, 100, 128, 200, 256, 400, 512, 800, 1024))
# An overlap as a fraction of the chunk size (0 to half, as the Chroma report's 800/400), so it is always smaller.
OVERLAP_FRACTIONS = Search(low=0.0, high=0.5, step=0.125, of="chunk_size")


def size_params(
    size_default: int,
    overlap_help: str | None = None,
    *,
    size_search: Search | None = None,
    overlap_search: Search | None = None,
) -> tuple[Param, ...]:
    """The common ``chunk_size`` (tokens) and, with ``overlap_help``, ``chunk_overlap`` parameters.

    Args:
        size_default: ``chunk_size``'s default.
        overlap_help: ``chunk_overlap``'s help (None: no overlap parameter).
        size_search: The range a tuner searches for ``chunk_size`` (None: not tuned).
        overlap_search: The range a tuner searches for ``chunk_overlap`` (None: not tuned).
    """
    size = Param("chunk_size", "int", size_default, "Maximum tokens per chunk.", min=1, max=100_000,
                 search=size_search)
    if overlap_help is None:
        return (size,)
    return (size, Param("chunk_overlap", "int", 0, overlap_help, min=0, max=100_000, search=overlap_search))


REGISTRY: dict[str, type[Chunker]] = {}


def register(cls: type[Chunker]) -> type[Chunker]:
    """Class decorator: add a chunker to :data:`REGISTRY` under its ``name``."""
    if cls.name in REGISTRY:
        raise ValueError(f"chunker {cls.name!r} registered twice")
    REGISTRY[cls.name] = cls
    return cls


def make_chunker(name: str, params: Mapping[str, Any] | None = None, tokenizer: str = "cl100k") -> Chunker:
    """Build the registered chunker ``name`` with ``params``.

    Raises:
        ParameterError: unknown chunker, unknown parameter or bad value.
    """
    if name not in REGISTRY:
        raise ParameterError(f"unknown chunker {name!r}; choose one of: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name](tokenizer=tokenizer, **dict(params or {}))


def config_needs(config: ChunkerConfig) -> tuple[str, ...]:
    """The models a configuration's chunker runs (``("lm",)``, ``("embedder",)``, ``("chat",)``…; () for none).

    Every question "does this configuration need a model, and which" goes through here, so an
    edited copy (``manual``) answers with its base's models.
    """
    cls = REGISTRY.get(config.name)
    return tuple(cls.needs_for(config.params_dict, config.tokenizer)) if cls is not None else ()


def run_chunker(doc: Document, config: ChunkerConfig, context: ModelContext | None = None) -> Chunking:
    """Chunk ``doc`` with the chunker a :class:`ChunkerConfig` describes (``context``: see :meth:`Chunker.chunk`)."""
    return make_chunker(config.name, config.params_dict, config.tokenizer).chunk(doc, context)


def chunker_specs() -> list[dict[str, Any]]:
    """Every registered chunker with its family, description and parameters (JSON-ready)."""
    out = []
    for name in sorted(REGISTRY):
        cls = REGISTRY[name]
        doc = inspect.getdoc(cls) or ""
        out.append(
            {
                "name": name,
                "family": cls.family,
                "needs": list(cls.needs),
                "length_param": (lp.name if (lp := cls.length_parameter()) is not None else None),
                "has_curve": cls.has_curve(),
                "summary": doc.split("\n", 1)[0],
                "doc": doc,
                "params": [p.to_json() for p in cls.params],
            }
        )
    return out
