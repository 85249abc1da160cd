"""The multi-granularity retrievers as registry entries: ``mog``, ``mogg`` and ``freechunker`` (family ``retriever``).

A retriever is not a chunker: what it returns depends on the query (MoG picks a granularity
level per query, FreeChunker assembles runs of units). It is registered beside the chunkers so
that one configuration (``ChunkerConfig``: name, parameters, tokenizer) names it everywhere a
chunker can be named — the CLI's ``--chunker mog --param router=oracle``, the app's forms, the
benchmark — and its parameters are validated in one place. What it *splits* (:meth:`split`) is
its finest units, the level every other level is built from: MoG's level-1 chunks, MoGG's
nodes of 1–2 sentences, FreeChunker's units. The Compare and Quality pages show those; how each
retrieves is the retriever registry's (:mod:`backend.retrieval.retriever`: a
:class:`~backend.retrieval.retriever.levels.LevelRetriever` each), and the query-time part (levels,
indexes, routing, selection) lives in :mod:`backend.retrieval.multi`.

The level-routing and granularity parsers are here, below the retrieval layer, so the registry can
validate ``router=…`` and ``granularities=…`` before anything is read or loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from backend.chunkers.base import Chunker, Param, make_chunker, register
from backend.chunkers.fixed_token import token_windows
from backend.errors import ParameterError
from backend.text.document import Document
from backend.tokenizers import SpanCounter, Tokenizer

__all__ = [
    "RetrieverChunker",
    "MoGRetriever",
    "MoGGRetriever",
    "FreeChunkerRetriever",
    "LevelRouting",
    "parse_level_routing",
    "parse_granularities",
    "token_units",
    "is_sliver",
    "merge_slivers",
    "MAX_GRANULARITY",
    "RETRIEVER_FAMILY",
]

RETRIEVER_FAMILY = "retriever"
Range = tuple[int, int]
ROUTER_HELP = (
    "Granularity weights per query: cv (a router cross-fitted in 5 folds on the question set), uniform, "
    "oracle (each question's own soft label: an upper bound), level:N (MoG's selection on level N only), "
    "or the path of a router file from 'python -m backend router train'."
)
MAX_LEVELS = 8
MAX_GRANULARITY = 64  # FreeChunker's largest window, in units


@dataclass(frozen=True)
class LevelRouting:
    """How MoG(G) weighs its granularity levels per query: a parsed ``router=`` value.

    ``kind`` is cv, uniform, oracle, level or path (the user-facing parameter keeps the paper's
    word, "router"; what it routes is a query to the levels).
    """

    kind: str
    level: int = 0  # 1-based, for kind "level"
    path: str = ""  # for kind "path"

    def label(self) -> str:
        """How it reads in tables: ``cv``, ``level:2``, ``router file mog.router.npz``."""
        if self.kind == "level":
            return f"level:{self.level}"
        if self.kind == "path":
            return f"router file {Path(self.path).name}"
        return self.kind


def parse_level_routing(raw: str, levels: int) -> LevelRouting:
    """Parse ``router=`` (the level routing) for a retriever with ``levels`` levels.

    Raises:
        ParameterError: an empty value, or ``level:N`` outside 1..levels.
    """
    text = str(raw).strip()
    low = text.lower()
    if not text:
        raise ParameterError("router must be cv, uniform, oracle, level:N or a router file path, got ''")
    if low in {"cv", "uniform", "oracle"}:
        return LevelRouting(low)
    if low.startswith("level:"):
        tail = low[len("level:") :].strip()
        if not tail.isdigit() or not 1 <= int(tail) <= levels:
            raise ParameterError(f"router={text}: the level must be a number in 1..{levels}")
        return LevelRouting("level", level=int(tail))
    return LevelRouting("path", path=text)


def parse_granularities(raw: str) -> tuple[int, ...]:
    """Granularities from a comma-separated string: ``"2,4"`` -> ``(2, 4)``.

    Returns them ascending and deduplicated (``"4, 2, 4"`` -> ``(2, 4)``).

    Raises:
        ParameterError: an item that is not a whole number in 2..64, or no item at all.
    """
    items = [part.strip() for part in str(raw).split(",")]
    if items == [""]:
        raise ParameterError(f"granularities ({raw!r}) must list at least one size, e.g. '2,4'")
    out = set()
    for item in items:
        if not re.fullmatch(r"[+]?\d+", item) or not 2 <= int(item) <= MAX_GRANULARITY:
            raise ParameterError(
                f"granularity {item!r} in {raw!r} must be a whole number from 2 to {MAX_GRANULARITY}"
            )
        out.add(int(item))
    return tuple(sorted(out))


def token_units(text: str, tokenizer: Tokenizer, unit_tokens: int) -> list[Range]:
    """Consecutive exact spans of ``unit_tokens`` tokens each (the last may be shorter).

    The spans cover the text from its first non-space character to its end and are cut at
    token starts (``tokenizer.token_starts``), never by decoding token ids. A span whose text
    alone re-tokenizes to more than ``unit_tokens`` tokens (a cut inside a multi-byte
    character) is shortened by a token, as :class:`~backend.chunkers.fixed_token.FixedTokenChunker`
    does. A whitespace-only span (possible only at a run of whitespace tokens) joins the span
    before it, so no unit is blank; that unit then holds a few whitespace tokens more.

    Args:
        text: The document text.
        tokenizer: Counts tokens and tells where they start.
        unit_tokens: Tokens per unit (the authors' code uses 256).

    Returns:
        ``(start, end)`` character offsets, ascending and contiguous; ``[]`` for a blank text.

    Raises:
        ParameterError: ``unit_tokens`` is not a whole number of at least 1.
    """
    if isinstance(unit_tokens, bool) or not isinstance(unit_tokens, (int, np.integer)) or unit_tokens < 1:
        raise ParameterError(f"unit_tokens ({unit_tokens!r}) must be a whole number of at least 1")
    begin = len(text) - len(text.lstrip())
    if begin == len(text):
        return []
    counter = SpanCounter(tokenizer, text)
    if counter.starts.size == 0:
        return [(begin, len(text))]
    out: list[Range] = []
    for a, b, _ in token_windows(text, counter, int(unit_tokens), begin=begin):
        if out and text[a:b].isspace():
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def is_sliver(piece: str) -> bool:
    """Whether ``piece`` is too small to be a retrieved unit: under 2 non-space characters, or no letter or digit.

    >>> [is_sliver(t) for t in (".", " --- ", "一", "Hi", "二〇")]
    [True, True, True, False, False]
    """
    visible = "".join(piece.split())
    return len(visible) < 2 or not any(ch.isalnum() for ch in visible)


def merge_slivers(text: str, spans: list[Range]) -> list[Range]:
    """``spans`` (ascending, not overlapping) with every sliver (:func:`is_sliver`) merged into a neighbour.

    A retriever's units are what it returns, alone or joined: a unit that is a lone ".", a
    "---" rule or a one-character heading ("一") would come back as a hit of its own. Punctuation
    joins the unit before it (the "." a splitter left after a sentence); a short word or number
    joins the unit after it (a heading numbers what follows). A sliver with no neighbour on its
    side takes the other one; a text that is one sliver stays one unit. A merged unit spans from
    the first start to the last end (the whitespace between them included).

    >>> merge_slivers("Hello there. . 一 Next part", [(0, 12), (13, 14), (15, 16), (17, 26)])
    [(0, 14), (15, 26)]
    """
    out: list[Range] = []
    waiting: int | None = None  # where slivers waiting for the next unit start
    for start, end in spans:
        piece = text[start:end]
        if is_sliver(piece):
            if out and waiting is None and not any(ch.isalnum() for ch in piece):
                out[-1] = (out[-1][0], end)
            elif waiting is None:
                waiting = start
            continue
        out.append((start if waiting is None else waiting, end))
        waiting = None
    if waiting is not None:  # slivers at the very end: the unit before them, else they stand alone
        last_end = spans[-1][1]
        if out:
            out[-1] = (out[-1][0], last_end)
        else:
            out.append((waiting, last_end))
    return out


def _routing_params(levels_default: int) -> tuple[Param, ...]:
    return (
        Param("levels", "int", levels_default, "Granularity levels (MoG: 5).", min=2, max=MAX_LEVELS),
        Param("k_r", "int", 3, "Candidates retrieved per level before the router weighs them (MoG: 3).", min=1, max=50),
        Param("router", "str", "cv", ROUTER_HELP),
        Param(
            "label", "str", "iou",
            "Soft-label similarity of a level's top-1 entry to the answer: iou, recall (of the excerpts) "
            "or embedding (cosine to the excerpts' text).",
            choices=("iou", "recall", "embedding"),
        ),
        Param("soft", "str", "0.8/0.2", "Soft labels of the best and second-best level (the paper: 0.8/0.2 or 0.7/0.3).",
              choices=("0.8/0.2", "0.7/0.3")),
        Param("label_k", "int", 0, "Entries per level the iou/recall label scores together: 0 (default) the retrieve "
              "depth, so a level is labelled by what it returns at that depth; 1 is the paper's top-1.", min=0, max=50),
    )


class RetrieverChunker(Chunker):
    """Base of the registered retrievers: :meth:`split` gives the finest units; routing params are validated."""

    family = RETRIEVER_FAMILY
    routed: ClassVar[bool] = True  # has a router (MoG, MoGG); FreeChunker has none

    def validate(self) -> None:
        super().validate()
        if self.routed:
            self.level_routing = parse_level_routing(self.values["router"], self.values["levels"])

    @property
    def soft_label_weights(self) -> tuple[float, float]:
        """The soft labels of the best and the second-best level (``soft=0.8/0.2``)."""
        top, second = self.values.get("soft", "0.8/0.2").split("/")
        return float(top), float(second)

    def level_names(self) -> list[str]:
        """One short name per level, finest first."""
        raise NotImplementedError

    def level_spec(self) -> dict[str, Any]:
        """The parameters that shape the levels (not the routing): a router file records and checks them."""
        routing = {"k_r", "router", "label", "soft", "label_k"}
        return {"retriever": self.name, **{k: v for k, v in self.values.items() if k not in routing},
                "tokenizer": self.tokenizer.name}


@register
class MoGRetriever(RetrieverChunker):
    """MoG (Mix-of-Granularity): five levels of chunks, a router picks one per query.

    Level 1 is the document cut by ``base`` at ``chunk_size`` tokens; a level-j chunk joins two
    adjacent level-(j−1) chunks (so level j is about 2^(j−1) × ``chunk_size`` tokens). Each level
    returns its top ``k_r`` chunks; every level-1 chunk under a hit scores ``w · t_rs`` (eq. 1–2);
    the level with the largest router weight is chosen and the parents, at that level, of the
    best-scoring level-1 chunks are returned (never parents ranked by their own weighted score:
    coarse levels score higher, Appendix A). What this entry *chunks* is level 1; a level-1 chunk
    that is only punctuation or one character joins a neighbour (:func:`merge_slivers`), so MoG
    never returns a lone "." as a hit.
    """

    name = "mog"
    params = (
        Param("chunk_size", "int", 50, "Level-1 chunk size in tokens; level j is 2^(j-1) times as long.", min=8, max=20_000),
        Param("base", "str", "recursive", "How level 1 is cut (exact spans, hard token limit).",
              choices=("recursive", "sentence", "fixed_token")),
        *_routing_params(5),
    )

    def level_names(self) -> list[str]:
        size = self.values["chunk_size"]
        return [f"L{j} (~{size << (j - 1)} tok)" for j in range(1, self.values["levels"] + 1)]

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        base = make_chunker(self.values["base"], {"chunk_size": self.values["chunk_size"]}, self.tokenizer)
        chunks = base.chunk(doc).chunks
        cut = [(c.start, c.end) for c in chunks]
        merged = merge_slivers(doc.text, cut)
        if merged == cut:
            return [(c.start, c.end, c.tokens) for c in chunks]
        return self.with_counts(doc.text, merged)  # a merged sliver may take a unit a token or two over chunk_size


@register
class MoGGRetriever(RetrieverChunker):
    """MoGG (MoG with graph context): nodes of 1–2 sentences linked by similarity; levels are hop ranges.

    Each node links to its ``k_graph`` most similar nodes with similarity at least ``t_graph``
    (``edge=cosine`` on the embedder's vectors, or ``edge=bm25``, each query's scores divided by
    the node's score against itself); level g is the neighbourhood within g−1 hops of a centre
    node (each node counted once), grown hop by hop while it stays within ``max_tokens``. The
    rest is MoG: top ``k_r`` per level, the router's weights, the parents at the chosen level
    of the best nodes — here the neighbourhood *centred* on each best node. An entry may cover
    several separate stretches of the text. What this entry *chunks* is the nodes.
    """

    name = "mogg"
    params = (
        Param("per_node", "int", 2, "Sentences per node (the paper: 1 or 2).", min=1, max=2),
        Param("edge", "str", "cosine", "Node similarity: cosine (embeddings) or bm25 (normalised by the self-score).",
              choices=("cosine", "bm25")),
        Param("k_graph", "int", 3, "Most similar nodes each node links to (the paper's figure: 3).", min=1, max=50),
        Param("t_graph", "float", 0.5, "Least similarity of an edge (the paper gives none).", min=-1.0, max=1.0),
        Param("max_tokens", "int", 1024, "Token cap of a neighbourhood (the centre is always kept).", min=16, max=100_000),
        *_routing_params(5),
    )

    def validate(self) -> None:
        super().validate()
        if self.values["edge"] == "bm25" and self.values["t_graph"] < 0:
            raise ParameterError(f"t_graph ({self.values['t_graph']}) must be in 0..1 with edge=bm25")

    def level_names(self) -> list[str]:
        return ["node"] + [f"{g} hop{'s' if g > 1 else ''}" for g in range(1, self.values["levels"])]

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        per = self.values["per_node"]
        sentences = [(s.start, s.end) for s in doc.sentences]
        nodes = [(sentences[i][0], sentences[min(i + per, len(sentences)) - 1][1]) for i in range(0, len(sentences), per)]
        return self.with_counts(doc.text, merge_slivers(doc.text, nodes))


@register
class FreeChunkerRetriever(RetrieverChunker):
    """FreeChunker (cross-granularity): units embedded once, windows of 2 and 4 units vectorised without re-embedding.

    Units are sentences (``unit=sentence``) or, as the authors' code does, fixed
    ``unit_tokens``-token spans (``unit=tokens``). For each size g in ``granularities`` a window
    starts every g//2 units (plus a tail window ending at the last unit). ``encoder=mean``: a
    window's vector is the renormalised mean of its units' vectors; ``encoder=exact`` embeds
    each window's own text (what the paper's trained encoder approximates);
    ``encoder=model:PATH`` runs a cross-granularity encoder from a local folder. A query takes
    the top-k entries of units and windows; overlapping or adjacent ones merge into maximal
    runs, ranked by their best entry, no character counted twice. What this entry *chunks* is
    the units.
    """

    name = "freechunker"
    routed = False
    params = (
        Param("unit", "str", "sentence", "Atomic unit: sentence, or tokens (fixed unit_tokens spans, the authors' code).",
              choices=("sentence", "tokens")),
        Param("unit_tokens", "int", 256, "Tokens per unit when unit=tokens.", min=8, max=8192),
        Param("granularities", "str", "2,4", "Window sizes in units, comma-separated (each 2..64)."),
        Param("encoder", "str", "mean", "Window vectors: mean (of unit vectors), exact (embed each window's text), "
              "or model:PATH (a cross-granularity encoder folder)."),
    )

    def validate(self) -> None:
        super().validate()
        self.sizes = parse_granularities(self.values["granularities"])
        enc = str(self.values["encoder"]).strip()
        if enc not in {"mean", "exact"} and not (enc.startswith("model:") and enc[len("model:") :].strip()):
            raise ParameterError(f"encoder must be mean, exact or model:PATH, got {enc!r}")

    def level_names(self) -> list[str]:
        return ["unit"] + [f"{g} units" for g in self.sizes]

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        if self.values["unit"] == "tokens":
            units = token_units(doc.text, self.tokenizer, self.values["unit_tokens"])
        else:
            units = [(s.start, s.end) for s in doc.sentences]
        return self.with_counts(doc.text, merge_slivers(doc.text, units))
