"""Building blocks of the Quality page: MoC's chunk-quality metrics as tables and figures.

Everything here is pure (no Streamlit): the page scores each configuration's chunks once
into a :class:`~backend.metrics.quality.PairTable` (and embeds them for DS), keeps those in session
state, and every control — K, the CS rule, the BC mode, δ — redraws from them through the
functions below, with no model call. Document text is untrusted: every chunk preview that
reaches a Plotly hover label or a download is HTML-escaped.

Direction of "best" per column (MoC, Table 3): BC higher, CS (both graphs) lower. DS is
shown as the paper does (section 4.5); its highest value is marked, though the paper finds
it does not follow QA quality.
"""

from __future__ import annotations

import html
import importlib.util
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from backend.chunking import ChunkerConfig, Chunking
from backend.metrics.quality import (
    DEFAULT_K,
    PairTable,
    boundary_clarity,
    dissimilarity,
    edge_values,
    estimate_cost,
    kept_edges,
    pair_table,
    structural_entropy,
)

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go
    from pandas.io.formats.style import Styler

    from backend.models.types import Progress

__all__ = [
    "BEST",
    "COLUMNS",
    "DEFAULT_TOKENS_PER_S",
    "QualityData",
    "bc_figure",
    "best_cells",
    "cached_pair_table",
    "cached_vectors",
    "cost_estimate",
    "cs_curve",
    "cs_k_figure",
    "figure_html",
    "format_seconds",
    "png_export_available",
    "quality_table",
    "score_chunkings",
    "stickiness_edges",
    "stickiness_figure",
    "styled_table",
    "table_csv",
]

# Which way is better, per metric column; chunks and mean length have no best.
BEST = {"bc": "max", "cs_complete": "min", "cs_incomplete": "min", "ds": "max"}
COLUMNS = ("configuration", "chunker", "chunks", "mean_tokens", "bc", "cs_complete", "cs_incomplete", "ds")
# Tokens per second the time estimate assumes until this session has timed a run of its own:
# a cautious figure for the bundled SmolLM2-135M on two busy CPU cores.
DEFAULT_TOKENS_PER_S = 150.0
PREVIEW_CHARS = 70
HIGHLIGHT = "background-color: #dcfce7; font-weight: 600"


@dataclass(frozen=True, eq=False)
class QualityData:
    """What the metrics of one configuration are computed from.

    Attributes:
        tag: The configuration's letter (A, B…).
        config: The configuration.
        chunking: Its chunks on the current document.
        table: The conditional scores (None when BC and CS were not asked for).
        vectors: The chunks' embeddings (None when DS was not asked for).
        complete: Whether ``table`` holds every ordered pair (in its window) for CS, or
            only the adjacent pairs BC needs.
    """

    tag: str
    config: ChunkerConfig
    chunking: Chunking
    table: PairTable | None = None
    vectors: np.ndarray | None = None
    complete: bool = False

    @property
    def n(self) -> int:
        """Number of chunks."""
        return len(self.chunking.chunks)


# --- cost and scoring -------------------------------------------------------------------------------


def cost_estimate(
    token_counts: Sequence[Sequence[int]], *, complete: bool, window: int | None, tokens_per_s: float
) -> dict[str, float]:
    """The summed :func:`~backend.metrics.quality.estimate_cost` of several chunkings, with a time estimate.

    Token counts are each configuration's own tokenizer's, so ``tokens`` (and the time) is
    an approximation of what the model reads.

    Returns:
        ``{"pairs", "tokens", "seconds"}``.
    """
    pairs = tokens = 0
    for counts in token_counts:
        cost = estimate_cost(list(counts), complete=complete, window=window)
        pairs += cost["pairs"]
        tokens += cost["tokens"]
    return {"pairs": pairs, "tokens": tokens, "seconds": tokens / max(tokens_per_s, 1e-9)}


def format_seconds(seconds: float) -> str:
    """``42`` → ``42 s``, ``390`` → ``6.5 min``, ``8000`` → ``2.2 h``."""
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def cached_vectors(cache: Any, fingerprint: str, texts: Sequence[str]) -> np.ndarray | None:
    """The embeddings of ``texts`` by the embedder ``fingerprint`` from the output cache alone, or None.

    A plain lookup (no compute lock), so a page never waits for a job embedding the same texts.
    """
    from backend.models.embeddings import embeddings_key

    texts = list(texts)
    value = cache.get(embeddings_key(fingerprint, texts)) if cache is not None and texts else None
    if value is None:
        return None
    vectors = np.asarray(value["vectors"], dtype=np.float32)
    return vectors if vectors.shape[0] == len(texts) else None


def cached_pair_table(
    texts: Sequence[str], scorer: Any, *, complete: bool, window: int | None, cache: Any
) -> PairTable:
    """:func:`~backend.metrics.quality.pair_table` through a scorer that refuses to compute: a cache-only lookup.

    The first and the last adjacent pair (needed by every table) are looked up first, so a
    chunking never scored costs a few cache reads, not n² of them, on every page run.
    ``scorer``'s refusal (e.g. ``NotCached``) propagates on the first miss.
    """
    texts = list(texts)
    if len(texts) > 3:
        for probe in (texts[:2], texts[-2:]):
            pair_table(probe, scorer, complete=False, cache=cache)
    return pair_table(texts, scorer, complete=complete, window=window, cache=cache)


def score_chunkings(
    chunkings: Sequence[Chunking],
    *,
    scorer: Any,
    embedder: Callable[[], Any] | None,
    complete: bool,
    window: int | None,
    cache: Any,
    progress: Progress | None = None,
) -> list[tuple[PairTable | None, np.ndarray | None]]:
    """Score every chunking's pairs and embed its chunks (the Quality page's background job).

    Args:
        chunkings: The chunkings, in order.
        scorer: The language model (None: no pair table, i.e. no BC or CS).
        embedder: A function returning the embedder (called once, in the job, so loading it
            happens there); None: no vectors (no DS).
        complete: Score every ordered pair (CS), not only adjacent ones (BC).
        window: Pair window ``w`` (only ``|i - j| <= w``), None for every pair.
        cache: The output cache.
        progress: ``progress(done, total)``; raises ``Cancelled`` after a cancel.

    Returns:
        Per chunking, ``(table, vectors)``.
    """
    from backend.models.embeddings import embed_texts

    out = []
    loaded = None
    parts = max(1, len(chunkings))
    for k, ch in enumerate(chunkings):
        texts = [c.text for c in ch.chunks]
        part = _part(progress, k, parts) if progress is not None else None
        table = None
        if scorer is not None:
            table = pair_table(texts, scorer, complete=complete, window=window, cache=cache, progress=part)
        vectors = None
        if embedder is not None:
            if loaded is None:
                loaded = embedder()
            vectors, _hit = embed_texts(loaded, texts, cache=cache)
        if progress is not None:
            progress(1000 * (k + 1), 1000 * parts)
        out.append((table, vectors))
    return out


def _part(progress: Progress, part: int, parts: int) -> Progress:
    """``progress`` for part ``part`` of ``parts`` equal parts (per mille)."""

    def report(done: int, total: int) -> None:
        frac = min(1.0, done / total) if total > 0 else 0.0
        progress(int(1000 * (part + frac)), 1000 * parts)

    return report


# --- the table (MoC Table 3) ------------------------------------------------------------------------


def _mean(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else math.nan


def quality_table(
    datas: Sequence[QualityData], *, K: float = DEFAULT_K, bc_mode: str = "reference", cs_rule: str = "paper",
    delta: int = 0,
) -> pd.DataFrame:
    """One row per configuration (index = tag): chunks, mean tokens, BC, CS complete, CS incomplete, DS.

    A metric that was not computed is ``nan``.
    """
    import pandas as pd

    rows = []
    for d in datas:
        counts = d.chunking.token_counts
        row = {
            "configuration": d.tag,
            "chunker": d.config.label,
            "chunks": d.n,
            "mean_tokens": float(np.mean(counts)) if counts else 0.0,
            "bc": math.nan,
            "cs_complete": math.nan,
            "cs_incomplete": math.nan,
            "ds": math.nan,
        }
        if d.table is not None:
            row["bc"] = _mean(boundary_clarity(d.table, bc_mode))
            if d.complete:
                edges = edge_values(d.table, cs_rule)
                row["cs_complete"] = structural_entropy(kept_edges(edges, K, graph="complete"), d.n)
                row["cs_incomplete"] = structural_entropy(
                    kept_edges(edges, K, graph="incomplete", delta=delta), d.n
                )
        if d.vectors is not None:
            row["ds"] = _mean(dissimilarity(d.vectors))
        rows.append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS)).set_index("configuration", drop=False)


def best_cells(table: pd.DataFrame) -> dict[str, list[Any]]:
    """Per metric column, the index labels of its best value (ties all count; an all-``nan`` column: none)."""
    out: dict[str, list[Any]] = {}
    for col, how in BEST.items():
        if col not in table:
            continue
        values = table[col].astype(float)
        if values.notna().sum() == 0:
            out[col] = []
            continue
        best = values.max() if how == "max" else values.min()
        out[col] = [i for i, v in values.items() if np.isfinite(v) and math.isclose(v, best, abs_tol=1e-12)]
    return out


def styled_table(table: pd.DataFrame) -> Styler:
    """The table with each metric column's best value highlighted (a pandas ``Styler``)."""
    best = best_cells(table)

    def mark(col: pd.Series) -> list[str]:
        winners = set(best.get(col.name, ()))
        return [HIGHLIGHT if i in winners else "" for i in col.index]

    shown = table.drop(columns=["configuration"])
    return shown.style.apply(mark, axis=0, subset=[c for c in BEST if c in shown]).format(
        {"mean_tokens": "{:.1f}", "bc": "{:.4f}", "cs_complete": "{:.3f}", "cs_incomplete": "{:.3f}", "ds": "{:.4f}"},
        na_rep="—",
    )


def table_csv(table: pd.DataFrame, *, K: float, bc_mode: str, cs_rule: str, delta: int, window: int | None) -> str:
    """The table as CSV, with the settings it was computed under as extra columns."""
    out = table.copy()
    out["K"], out["bc_mode"], out["cs_rule"], out["delta"] = K, bc_mode, cs_rule, delta
    out["window"] = "" if window is None else window
    return out.to_csv(index=False)


# --- figures -----------------------------------------------------------------------------------------


def _flat(text: str) -> str:
    return " ".join(text.split())


def _head(text: str, n: int = PREVIEW_CHARS) -> str:
    """The first ``n`` characters of a chunk on one line, escaped for a Plotly hover label."""
    flat = _flat(text[: n * 3])
    return html.escape(flat if len(flat) <= n else flat[: n - 1] + "…", quote=False)


def _tail(text: str, n: int = PREVIEW_CHARS) -> str:
    """The last ``n`` characters of a chunk on one line, escaped."""
    flat = _flat(text[-n * 3 :])
    return html.escape(flat if len(flat) <= n else "…" + flat[-(n - 1) :], quote=False)


def bc_figure(datas: Sequence[QualityData], colors: Sequence[str], *, bc_mode: str = "reference") -> go.Figure:
    """BC of every boundary along the document, one line per configuration.

    x is the character offset where chunk i+1 starts; the hover shows the end of chunk i
    and the start of chunk i+1.
    """
    import plotly.graph_objects as go

    fig = go.Figure()
    for d, color in zip(datas, colors):
        if d.table is None or d.n < 2:
            continue
        bc = boundary_clarity(d.table, bc_mode)
        chunks = d.chunking.chunks
        x = [chunks[i + 1].start for i in range(d.n - 1)]
        custom = [[i, _tail(chunks[i].text), _head(chunks[i + 1].text)] for i in range(d.n - 1)]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[v if math.isfinite(v) else None for v in bc],
                mode="lines+markers",
                name=f"{d.tag} · {d.config.name}",
                line={"color": color, "width": 1.5},
                marker={"size": 6},
                customdata=custom,
                hovertemplate=(
                    f"<b>{d.tag}</b> · boundary %{{customdata[0]}} · char %{{x:,}}<br>BC %{{y:.4f}}<br>"
                    "<i>…%{customdata[1]}</i><br><b>│</b> <i>%{customdata[2]}</i><extra></extra>"
                ),
            )
        )
    fig.update_layout(
        height=320,
        margin={"l": 10, "r": 10, "t": 10, "b": 40},
        hovermode="closest",
        xaxis={"title": {"text": "boundary (character offset)"}, "tickformat": ",d"},
        yaxis={"title": {"text": "BC" + (" (NLL ratio)" if bc_mode == "reference" else " (PPL ratio)")}},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
    )
    return fig


def cs_curve(
    table: PairTable, ks: Sequence[float], *, rule: str = "paper", delta: int = 0
) -> tuple[list[float], list[float]]:
    """CS of the complete and of the incomplete graph at each K (edge values computed once)."""
    edges = edge_values(table, rule)
    complete = [structural_entropy(kept_edges(edges, k, graph="complete"), table.n) for k in ks]
    incomplete = [structural_entropy(kept_edges(edges, k, graph="incomplete", delta=delta), table.n) for k in ks]
    return complete, incomplete


def cs_k_figure(
    datas: Sequence[QualityData], colors: Sequence[str], ks: Sequence[float], K: float, *, rule: str = "paper",
    delta: int = 0,
) -> go.Figure:
    """CS against K per configuration (MoC Table 4, live): complete graph solid, incomplete dashed."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for d, color in zip(datas, colors):
        if d.table is None or not d.complete:
            continue
        complete, incomplete = cs_curve(d.table, ks, rule=rule, delta=delta)
        for graph, ys, dash in (("complete", complete, "solid"), ("incomplete", incomplete, "dash")):
            fig.add_trace(
                go.Scatter(
                    x=list(ks), y=ys, mode="lines", name=f"{d.tag} {graph}", line={"color": color, "dash": dash},
                    hovertemplate=f"{d.tag} · {graph}<br>K %{{x:.2f}} · CS %{{y:.3f}}<extra></extra>",
                )
            )
    fig.add_vline(x=K, line={"color": "#dc2626", "width": 1, "dash": "dot"})
    fig.update_layout(
        height=280,
        margin={"l": 10, "r": 10, "t": 10, "b": 40},
        xaxis={"title": {"text": "K"}},
        yaxis={"title": {"text": "CS (bits)"}, "rangemode": "tozero"},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
    )
    return fig


def stickiness_edges(
    table: PairTable, K: float, *, rule: str = "paper", graph: str = "complete", delta: int = 0
) -> list[tuple[int, int]]:
    """The kept edges of a chunking's stickiness graph (exactly :func:`~backend.metrics.quality.kept_edges`)."""
    return kept_edges(edge_values(table, rule), K, graph=graph, delta=delta)


def _arc(i: int, j: int, points: int) -> tuple[np.ndarray, np.ndarray]:
    """A half-ellipse from node i to node j: above the line when i < j (d before q), below otherwise."""
    t = np.linspace(0.0, math.pi, points)
    centre, radius = (i + j) / 2, abs(j - i) / 2
    x = centre - radius * np.cos(t) * (1 if j > i else -1)
    y = np.sin(t) * radius * (1 if j > i else -1)
    return x, y


def stickiness_figure(
    data: QualityData, K: float, color: str, *, rule: str = "paper", graph: str = "complete", delta: int = 0
) -> go.Figure:
    """A chunking's stickiness graph as an arc diagram.

    Nodes are the chunks in document order on a line, sized by degree; each kept ordered
    edge (d = chunk i, q = chunk j) is an arc, above the line when d comes first and below
    when it comes after. The hover of a node shows its degree and the start of its text.
    ``fig.layout.meta["edges"]`` is the number of arcs drawn (= kept edges).
    """
    import plotly.graph_objects as go

    if data.table is None:
        raise ValueError("the stickiness graph needs the configuration's pair table")
    n = data.n
    edges = stickiness_edges(data.table, K, rule=rule, graph=graph, delta=delta)
    degree = np.zeros(n, dtype=np.int64)
    for i, j in edges:
        degree[i] += 1
        degree[j] += 1
    points = 16 if len(edges) <= 1500 else 6  # thousands of arcs stay one light trace
    xs: list[float | None] = []
    ys: list[float | None] = []
    for i, j in edges:
        x, y = _arc(i, j, points)
        xs.extend(x.tolist() + [None])
        ys.extend(y.tolist() + [None])
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=xs, y=ys, mode="lines", line={"color": color, "width": 0.8}, opacity=0.45, hoverinfo="skip",
            showlegend=False, name="edges",
        )
    )
    chunks = data.chunking.chunks
    peak = max(int(degree.max()) if n else 0, 1)
    fig.add_trace(
        go.Scatter(
            x=list(range(n)),
            y=[0.0] * n,
            mode="markers",
            marker={
                "size": (6 + 18 * np.sqrt(degree / peak)).tolist(),
                "color": color,
                "line": {"color": "white", "width": 1},
            },
            customdata=[[int(degree[k]), c.tokens, _head(c.text)] for k, c in enumerate(chunks)],
            hovertemplate="chunk %{x} · degree %{customdata[0]} · %{customdata[1]} tokens<br>"
            "<i>%{customdata[2]}</i><extra></extra>",
            showlegend=False,
            name="chunks",
        )
    )
    span = max(n - 1, 1) / 2
    fig.update_layout(
        height=300,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        title={
            "text": f"{data.tag} · {len(edges):,} edges · CS {structural_entropy(edges, n):.3f}",
            "font": {"size": 13},
        },
        xaxis={"visible": False, "range": [-1, max(n, 1)]},
        yaxis={"visible": False, "range": [-span - 0.5, span + 0.5]},
        plot_bgcolor="#ffffff",
        meta={"edges": len(edges), "graph": graph, "K": K, "rule": rule},
    )
    return fig


def figure_html(fig: go.Figure) -> str:
    """A self-contained HTML page of ``fig`` (plotly.js inlined: it opens offline)."""
    return fig.to_html(include_plotlyjs=True, full_html=True)


def png_export_available() -> bool:
    """Whether Plotly can write PNG here (it needs the ``kaleido`` package)."""
    return importlib.util.find_spec("kaleido") is not None
