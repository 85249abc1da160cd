"""The one-file HTML report: the Summary's verdict and table with the evidence, for people who were not in the room.

One self-contained file that opens offline: plotly.js is inlined once (the bundle the
``plotly`` package ships, :func:`backend.figures.export.plotly_js`), every figure is a bare
``<div>`` drawn by it (:func:`backend.figures.export.figure_div`), the styles are inline and
use the system's fonts, and nothing names another host in a ``src`` or ``href``. The figures
are the app's own builders from :mod:`backend.figures`, so the report shows what the pages
show. Retrieval numbers about the document come only from questions on it; a benchmark's
questions on other corpora get a section of their own (``retrieval-elsewhere``, titled with the
set and its corpora), after the document's retrieval section. Document text is untrusted:
every piece of it (names, labels, chunk previews, question texts, settings) is HTML-escaped
here, and the figures escape their hover text themselves. Apart from the time it was made, the same inputs give the same bytes.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from backend import __version__
from backend.chunkers import config_needs, make_chunker
from backend.chunkers.meta.algorithms import boundaries_at, boundary_candidates, sentence_values
from backend.chunkers.manual import edit_rows
from backend.chunkers.meta.results import PPLScores
from backend.chunking import ChunkerConfig, Chunking
from backend.curves import Curve
from backend.errors import ModelError, NotCached, ParameterError
from backend.figures.charts import PREVIEW_CHARS, boundary_strip, config_color, size_histogram
from backend.figures.curves import curve_chart
from backend.figures.export import figure_div, plotly_js
from backend.figures.ppl import values_chart
from backend.figures.quality import bc_figure, cs_k_figure, stickiness_figure
from backend.figures.retrieval import agreement_heatmaps, coverage_strip, metric_bars, question_heatmap
from backend.metrics.formulas import DEFAULT_K
from backend.metrics.report import QualityData
from backend.report.summary import (
    METRIC_INFO,
    METRICS,
    RetrievalElsewhere,
    Summary,
    split_benchmark,
    verdict,
)
from backend.report.tuning import tuning_section
from backend.retrieval.evaluate import Benchmark, coverage_rows
from backend.retrieval.questions import QuestionSet
from backend.text.document import Document
from backend.tune.types import TuneResult

if TYPE_CHECKING:
    import plotly.graph_objects as go


__all__ = ["SECTIONS", "ELSEWHERE_SECTION", "NOT_COMPUTED", "report_html", "cached_curves", "standalone_page"]

# The report's sections, in order: (element id, heading). Every one is always present; one
# whose data is missing says so in a line, so a reader sees what was not computed.
SECTIONS = (
    ("verdict", "Verdict"),
    ("table", "The numbers"),
    ("configurations", "Configurations and models"),
    ("boundaries", "Where each configuration cuts"),
    ("sizes", "Chunk sizes"),
    ("ppl", "Perplexity curves"),
    ("quality", "Boundary clarity and chunk stickiness"),
    ("retrieval", "Retrieval on this document"),
)
# The section of a benchmark's questions on other corpora, right after "retrieval": present only
# when there are such questions, its heading naming the set and its corpora (RetrievalElsewhere.heading).
ELSEWHERE_SECTION = "retrieval-elsewhere"
NOT_COMPUTED = "not computed yet"
PREVIEW_CHUNKS = 3  # chunk previews per configuration
K_GRID = [round(0.05 * i, 2) for i in range(31)]  # CS against K: the Quality page's K range, 0 … 1.5
COVERAGE_BINS = 200
_MODEL_ROLES = (
    ("lm", "Language model (BC, CS, perplexity)"),
    ("embedder", "Embedder (retrieval, DS)"),
    ("chat", "Chat model (LLM chunkers)"),
)
_NEED_ROLES = {"lm": "lm", "embedder": "embedder", "chat": "chat"}  # a chunker's ``needs`` → the models' role
_NEED_LABELS = {"lm": "language model", "embedder": "embedder", "chat": "chat model"}

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #111827; margin: 0;
       background: #f8fafc; line-height: 1.45; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 48px; background: #ffffff; }
h1 { font-size: 1.6rem; margin: 0 0 4px; } h2 { font-size: 1.2rem; margin: 32px 0 8px;
border-bottom: 1px solid #e5e7eb; padding-bottom: 4px; } h3 { font-size: 1rem; margin: 16px 0 6px; }
.meta { color: #4b5563; font-size: 0.9rem; } .meta code { font-size: 0.85rem; }
table { border-collapse: collapse; font-size: 0.9rem; margin: 6px 0 12px; }
th, td { border: 1px solid #e5e7eb; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f1f5f9; } th[title] { cursor: help; text-decoration: underline dotted; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.best { background: #dcfce7; font-weight: 600; } td.missing { color: #9ca3af; font-style: italic; }
.tag { display: inline-block; min-width: 1.4em; text-align: center; color: #fff; border-radius: 4px;
       padding: 0 4px; font-weight: 600; }
.note { color: #6b7280; font-size: 0.9rem; } .grid { display: grid; grid-template-columns: repeat(auto-fill,
minmax(360px, 1fr)); gap: 8px 16px; } .card { border: 1px solid #e5e7eb; border-radius: 6px; padding: 8px 12px; }
.preview { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.8rem; white-space: pre-wrap;
           color: #374151; background: #f9fafb; border-left: 3px solid #cbd5e1; padding: 2px 6px; margin: 4px 0; }
ul.verdict li { margin: 4px 0; }
"""


def _e(value: Any) -> str:
    """Any value as escaped HTML text (quotes too: it may stand in an attribute)."""
    return html.escape(str(value), quote=True)


@dataclass
class _Figures:
    """Numbers the figures' ``<div>`` ids in the order they are drawn, so the output is deterministic."""

    count: int = 0

    def div(self, fig: go.Figure) -> str:
        self.count += 1
        return f'<div class="figure">{figure_div(fig, f"figure-{self.count}")}</div>'


def _preview(text: str, n: int = PREVIEW_CHARS * 2) -> str:
    """The start of a chunk on one line, escaped once for HTML (Plotly's ``preview`` escapes for hover labels)."""
    flat = " ".join(text[: n * 2].split())
    return _e(flat if len(flat) <= n else flat[: n - 1] + "…")


def _tag_badge(tag: str, index: int) -> str:
    color = config_color(index)
    return f'<span class="tag" style="background:{color}">{_e(tag)}</span>'


def _header(summary: Summary, doc: Document, created: datetime) -> str:
    when = created.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    name = doc.source or summary.doc_name
    return (
        f'<header id="document"><h1>Chunk Lab report: {_e(name)}</h1>'
        f'<p class="meta">Document <b>{_e(name)}</b> · hash <code>{_e(doc.id)}</code> · '
        f"{len(doc.text):,} characters · {len(doc.sentences):,} sentences · {_e(doc.kind)} · language "
        f"{_e(doc.language)}<br>Made <time datetime=\"{_e(created.astimezone(timezone.utc).isoformat())}\">"
        f'{_e(when)}</time> by Chunk Lab <span id="version">{_e(__version__)}</span> · '
        f"{len(summary.rows)} configuration{'s' if len(summary.rows) != 1 else ''}</p></header>"
    )


def _verdict(summary: Summary) -> str:
    lines = verdict(summary)
    if not lines:
        return '<p class="note">The numbers computed so far single out no configuration.</p>'
    return '<ul class="verdict">' + "".join(f"<li>{_e(line)}</li>" for line in lines) + "</ul>"


def _table(summary: Summary | RetrievalElsewhere, metrics: tuple[str, ...] = METRICS,
           element_id: str = "summary-table") -> str:
    head = "".join(f'<th title="{_e(METRIC_INFO[m].help)}">{_e(METRIC_INFO[m].label)}</th>' for m in metrics)
    best = {m: summary.best(m) for m in metrics} if isinstance(summary, Summary) else {}
    body = []
    for i, row in enumerate(summary.rows):
        cells = []
        for m in metrics:
            value = row.values.get(m)
            note = row.notes.get(m)
            title = f' title="{_e(note)}"' if note else ""
            shown = _e(row.cell(m)) + (f" <small>({_e(note)})</small>" if note else "")
            if value is None:
                cells.append(f'<td class="missing"{title}>{NOT_COMPUTED}</td>')
            elif best.get(m) == row.tag:
                cells.append(f'<td class="num best"{title}>★ {shown}</td>')
            else:
                cells.append(f'<td class="num"{title}>{shown}</td>')
        body.append(f"<tr><th>{_tag_badge(row.tag, i)}</th><td>{_e(row.config.label)}</td>{''.join(cells)}</tr>")
    table = f'<table id="{element_id}"><thead><tr><th></th><th>Configuration</th>{head}</tr></thead>' \
        f"<tbody>{''.join(body)}</tbody></table>"
    if not isinstance(summary, Summary):
        return table
    missing = sum(1 for r in summary.rows for m in metrics if r.values.get(m) is None)
    scope = summary.retrieval
    spans = any(r.interval(m) is not None for r in summary.rows for m in metrics)
    about = (
        f"Recall, precision, IoU and precision-Ω: the {scope.questions} question{'s' if scope.questions != 1 else ''} "
        f"of {_e(scope.set_title)} on this document" + (f", {_e(scope.across)}" if scope.across else "") + (
            "; each mean with its 95% interval over these questions in brackets, ★ only where the difference to every "
            "other configuration, question by question, has an interval that excludes zero." if spans else "."
        )
        if scope is not None
        else "Recall, precision, IoU and precision-Ω: no benchmark on questions about this document yet."
    )
    estimated = any(r.estimate(m) is not None for r in summary.rows for m in metrics)
    intervals = (
        " A value with ± is an estimate from the pairs scored so far (how many, in brackets) and its 95% interval; "
        "★ marks it only when that interval does not overlap another's." if estimated else ""
    )
    foot = (
        f'<p class="note">★ marks the best value of a column; hover a column\'s name for what it means.{intervals} '
        f"{about} {missing} number{'s are' if missing != 1 else ' is'} {NOT_COMPUTED}.</p>"
    )
    return table + foot


def _models_of(summary: Summary, models: Mapping[str, str] | None, benchmark: Benchmark | None,
               ppl: PPLScores | None) -> dict[str, str]:
    """Role (``lm``, ``embedder``, ``chat``) → a description, from ``models``, else the settings and the data."""
    out: dict[str, str] = {}
    for role, _ in _MODEL_ROLES:
        value = summary.settings.get(role)
        if isinstance(value, str) and value:
            out[role] = value
    if ppl is not None:
        out.setdefault("lm", ppl.model_name)
    if benchmark is not None:
        out.setdefault("embedder", f"{benchmark.embedder} ({benchmark.embedder_fingerprint[:12]})")
    out.update({k: v for k, v in (models or {}).items() if v})
    return out


def _needs(config: ChunkerConfig) -> tuple[str, ...]:
    return config_needs(config)


def _edit_list(doc: Document, config: ChunkerConfig) -> str:
    """An edited copy's base and edits (each cut with its page and the text on both sides), else ``""``."""
    if config.name != "manual":
        return ""
    try:
        rows = edit_rows(doc, config)
    except ParameterError as e:
        return _missing(f"The edit list cannot be read: {e}")
    base = _e(str(config.params_dict.get("base", "")))
    if not rows:
        return f'<p class="note edits">Edited copy of <code>{base}</code>: no edits on this document.</p>'
    items = "".join(
        f'<tr class="edit-{r.op}"><td>cut {r.op}</td><td>{r.offset:,}</td><td>{r.page}</td>'
        f"<td>…{_e(r.before)} <b>‖</b> {_e(r.after)}…</td></tr>"
        for r in rows
    )
    return (
        f'<p class="note edits">Edited copy of <code>{base}</code>: its chunks with these edits '
        f"(snapped to {_e(str(config.params_dict.get('snap', 'sentence')))} starts):</p>"
        f'<table class="edits"><tr><th>edit</th><th>character</th><th>page</th><th>where (‖ is the cut)</th></tr>'
        f"{items}</table>"
    )


def _configurations(summary: Summary, doc: Document, chunkings: Mapping[str, Chunking], roles: Mapping[str, str]) -> str:
    model_rows = "".join(
        f"<tr><th>{label}</th><td>{_e(roles[role]) if role in roles else '<i>not used</i>'}</td></tr>"
        for role, label in _MODEL_ROLES
    )
    settings = "".join(
        f"<tr><th>{_e(k)}</th><td>{_e(json.dumps(v, ensure_ascii=False, default=str))}</td></tr>"
        for k, v in summary.settings.items()
    )
    cards = []
    for i, row in enumerate(summary.rows):
        config = row.config
        shown = [(k, v) for k, v in config.params if not (config.name == "manual" and k == "edits")]
        params = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in shown)
        params += f"<tr><th>tokenizer</th><td>{_e(config.tokenizer)}</td></tr>"
        needs = _needs(config)
        runs = ", ".join(f"{_NEED_LABELS.get(n, n)}: {roles.get(_NEED_ROLES.get(n, n), 'default')}" for n in needs)
        previews = ""
        ch = chunkings.get(row.tag)
        if ch is not None:
            previews = "".join(
                f'<div class="preview">#{c.index} · {c.tokens} tokens · {_preview(c.text)}</div>'
                for c in ch.chunks[:PREVIEW_CHUNKS]
            )
            previews = f"<p class=\"note\">{len(ch.chunks):,} chunks; the first ones:</p>{previews}"
        cards.append(
            f'<div class="card config" id="config-{_e(row.tag)}"><h3>{_tag_badge(row.tag, i)} {_e(config.label)}</h3>'
            f"<table><tr><th>chunker</th><td>{_e(config.name)}</td></tr>{params}</table>"
            f"<p class=\"note\">Models it runs: {_e(runs) if runs else 'none'}</p>{_edit_list(doc, config)}{previews}</div>"
        )
    return (
        f'<table id="models">{model_rows}</table>'
        f'<div class="grid">{"".join(cards)}</div>'
        + (f'<h3>Settings</h3><table id="settings">{settings}</table>' if settings else "")
    )


def _missing(what: str) -> str:
    return f'<p class="note missing-data">{_e(what)}</p>'


def _tags_colors(summary: Summary) -> tuple[list[str], list[str]]:
    tags = [row.tag for row in summary.rows]
    return tags, [config_color(i) for i in range(len(tags))]


def _boundaries(summary: Summary, doc: Document, chunkings: Mapping[str, Chunking], figs: _Figures,
                tolerance: int) -> str:
    tags = [t for t, _ in zip(*_tags_colors(summary)) if t in chunkings]
    if not tags:
        return _missing(f"No chunking: {NOT_COMPUTED}.")
    ordered = [chunkings[t] for t in tags]
    out = [
        '<p class="note">Every chunk as a bar over the document\'s characters, one row per configuration '
        "(hover a bar for its chunk).</p>",
        figs.div(boundary_strip(ordered, tags, len(doc.text), revision=doc.id)),
    ]
    if len(ordered) > 1:
        bounds, overlap, _, _ = agreement_heatmaps(ordered, tags, tolerance)
        out += [
            f"<h3>Agreement between configurations (boundaries within {tolerance} characters)</h3>",
            f'<div class="grid">{figs.div(bounds)}{figs.div(overlap)}</div>',
        ]
    return "".join(out)


def _sizes(summary: Summary, chunkings: Mapping[str, Chunking], figs: _Figures) -> str:
    tags, colors = _tags_colors(summary)
    cells = []
    for tag, color in zip(tags, colors):
        if tag in chunkings:
            fig = size_histogram([chunkings[tag]], [tag], [color], "tokens")
            fig.update_layout(height=260)
            cells.append(figs.div(fig))
    if not cells:
        return _missing(f"No chunking: {NOT_COMPUTED}.")
    return f'<div class="grid">{"".join(cells)}</div>'


def _ppl_setting(summary: Summary) -> tuple[float, str, str, str | None]:
    """θ, rule and value of the first perplexity configuration (the ``ppl`` chunker's defaults otherwise), and its tag."""
    for row in summary.rows:
        params = row.config.params_dict
        if row.config.name.startswith("ppl") and "threshold" in params:
            return float(params["threshold"]), str(params.get("rule", "reference")), str(params.get("value", "nll")), row.tag
    return 0.5, "reference", "nll", None


def _ppl(summary: Summary, doc: Document, ppl: PPLScores | None, curves: Mapping[str, Curve] | None,
         figs: _Figures) -> str:
    out = []
    if ppl is not None:
        theta, rule, value, tag = _ppl_setting(summary)
        values = sentence_values(ppl.nll, value)
        cuts = boundaries_at(boundary_candidates(values, rule), theta, rule)
        source = f"configuration {tag}'s" if tag is not None else "the ppl chunker's default"
        out += [
            f"<h3>Per-sentence {'mean NLL' if value == 'nll' else 'perplexity'} under {_e(ppl.model_name)}</h3>",
            f'<p class="note">θ = {theta:g} ({_e(rule)} rule, {source}): {len(cuts.kept):,} of '
            f"{cuts.minima:,} minima end a chunk.</p>",
            figs.div(values_chart(ppl, values, cuts, "mean NLL" if value == "nll" else "perplexity", revision=doc.id)),
        ]
    tags, colors = _tags_colors(summary)
    labels = {row.tag: row.config.label for row in summary.rows}
    for tag, color in zip(tags, colors):
        if curves and tag in curves:
            out.append(figs.div(curve_chart(curves[tag], doc.text, color, f"{tag} · {labels[tag]}", revision=doc.id)))
    if not out:
        return _missing(
            f"Perplexity scores: {NOT_COMPUTED} (no configuration cuts on a curve, and the document has not been "
            "scored by a language model)."
        )
    return "".join(out)


def _quality(summary: Summary, quality: Mapping[str, QualityData] | None, figs: _Figures) -> str:
    tags, colors = _tags_colors(summary)
    pairs = [(quality[t], c) for t, c in zip(tags, colors) if quality and t in quality and quality[t].table is not None]
    if not pairs:
        return _missing(f"Boundary clarity and chunk stickiness: {NOT_COMPUTED}.")
    s = summary.settings
    K = float(s.get("K", DEFAULT_K))
    bc_mode, cs_rule, delta = str(s.get("bc_mode", "reference")), str(s.get("cs_rule", "paper")), int(s.get("delta", 0) or 0)
    scored, dcolors = [d for d, _ in pairs], [c for _, c in pairs]
    out = [
        f"<h3>BC at every boundary ({_e(bc_mode)} mode; higher is clearer)</h3>",
        figs.div(bc_figure(scored, dcolors, bc_mode=bc_mode)),
    ]
    complete = [(d, c) for d, c in pairs if d.table.complete]
    if complete:
        out += [
            f"<h3>CS against K ({_e(cs_rule)} rule, δ = {delta}; lower is better), K = {K:g} marked</h3>",
            figs.div(cs_k_figure([d for d, _ in complete], [c for _, c in complete], K_GRID, K, rule=cs_rule,
                                 delta=delta)),
            f"<h3>Stickiness graphs at K = {K:g}</h3>",
            '<div class="grid">'
            + "".join(figs.div(stickiness_figure(d, K, c, rule=cs_rule, delta=delta)) for d, c in complete)
            + "</div>",
        ]
    else:
        out.append(_missing(f"Chunk stickiness (every pair of chunks scored): {NOT_COMPUTED}."))
    return "".join(out)


def _retrieval(summary: Summary, doc: Document, part: Benchmark | None, questions: QuestionSet | None,
               figs: _Figures) -> str:
    """The figures of one part of a benchmark (its questions on this document, or on the other corpora)."""
    if part is None or not part.results:
        return _missing(f"Retrieval on this document: {NOT_COMPUTED} (no benchmark on questions about this document).")
    by_config = {row.config: (row.tag, i) for i, row in enumerate(summary.rows)}
    tags, colors = [], []
    for j, r in enumerate(part.results):
        tag, i = by_config.get(r.config, (f"#{j + 1}", j))
        tags.append(tag)
        colors.append(config_color(i))
    texts = [q.question for q in part.results[0].questions]
    retrieve = "as many chunks as hold excerpts" if part.retrieve == -1 else f"top {part.retrieve}"
    out = [
        f'<p class="note">{part.questions} questions over {len(part.corpora)} '
        f"corpus{'es' if len(part.corpora) != 1 else ''} ({_e(', '.join(part.corpora))}), {retrieve}, "
        f"embedder {_e(part.embedder)}.</p>",
        figs.div(metric_bars(part, tags, colors)),
        "<h3>IoU per question</h3>",
        figs.div(question_heatmap(part.matrix("iou"), texts, tags, "iou")),
        "<h3>Recall per question</h3>",
        figs.div(question_heatmap(part.matrix("recall"), texts, tags, "recall")),
        '<details><summary>The questions</summary><ol class="questions">'
        + "".join(f"<li>{_e(t)}</li>" for t in texts)
        + "</ol></details>",
    ]
    if questions is not None and part.corpora:
        mine = questions.corpora_of(doc)
        corpus = next((cid for cid in part.corpora if cid in mine), part.corpora[0])
        rows, excerpts = coverage_rows(part, questions, corpus, COVERAGE_BINS)
        out += [
            f"<h3>What was retrieved along {_e(corpus)}, above where the answers are</h3>",
            figs.div(coverage_strip(rows, excerpts, tags, len(questions.corpora[corpus]))),
        ]
    return "".join(out)


def _elsewhere(summary: Summary, doc: Document, part: Benchmark, questions: QuestionSet | None,
               figs: _Figures) -> str:
    """The section of a benchmark's questions on other corpora: what they are, their table, their figures."""
    elsewhere = summary.elsewhere
    if elsewhere is None:
        return ""
    return (
        f'<section id="{ELSEWHERE_SECTION}"><h2>{_e(elsewhere.heading)}</h2>'
        f'<p class="note">{_e(elsewhere.caption)}</p>'
        + _table(elsewhere, tuple(m for m in METRICS if m in ("recall", "precision", "iou", "precision_omega")),
                 "elsewhere-table")
        + _retrieval(summary, doc, part, questions, figs)
        + "</section>"
    )


def _json_script(element_id: str, data: Any) -> str:
    """``data`` as an inert JSON ``<script>`` a reader's tools can parse (``<`` escaped, so no text ends it)."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, default=str).replace("<", "\\u003c")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def standalone_page(title: str, body: str, *, data_id: str, data: Any) -> str:
    """A one-file report page around ``body`` (HTML already escaped): this report's styles, plotly.js inlined once,
    and ``data`` as an inert JSON ``<script id=data_id>`` a reader's tools can parse. ``title`` is escaped here.

    The corpus report (:mod:`backend.report.corpus`) is drawn in it, so both reports look and open alike.
    """
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="Chunk Lab {_e(__version__)}">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style>"
        f'<script type="text/javascript" id="plotly-js">{plotly_js()}</script></head>'
        f"<body><main>{body}{_json_script(data_id, data)}</main></body></html>\n"
    )


def report_html(
    summary: Summary,
    doc: Document,
    chunkings: Mapping[str, Chunking],
    *,
    benchmark: Benchmark | None = None,
    quality: Mapping[str, QualityData] | None = None,
    ppl: PPLScores | None = None,
    curves: Mapping[str, Curve] | None = None,
    questions: QuestionSet | None = None,
    models: Mapping[str, str] | None = None,
    created: datetime | None = None,
    tuning: TuneResult | None = None,
) -> str:
    """The one-file HTML report of a comparison: verdict, table, configurations and every figure that exists.

    Sections (:data:`SECTIONS`, each a ``<section>`` with that id): the verdict
    (:func:`~backend.report.summary.verdict`), the table (every configuration × :data:`METRICS`,
    the best of each column marked, each column's help sentence as its ``title``, None as
    "not computed yet"), each configuration's parameters, models and first chunks, the boundary
    strip (and the boundary agreement between configurations), a size histogram per
    configuration, the perplexity curves, BC along the document, CS against K and the
    stickiness graphs, and the benchmark's bars and heat maps over its questions on this
    document. A section without its data says "not computed yet". The benchmark's questions on
    other corpora, if any, follow in a section of their own (:data:`ELSEWHERE_SECTION`).

    Args:
        summary: The Summary's rows, settings and verdict.
        doc: The document (its name, hash and text).
        chunkings: Each configuration's chunking, by tag.
        benchmark: A benchmark of the same configurations on a question set (split by
            :func:`~backend.report.summary.split_benchmark`: ``summary`` must be made with the same
            benchmark and set).
        quality: Each configuration's :class:`~backend.metrics.report.QualityData`, by tag
            (its pair table drawn as BC; a complete table also as CS and a stickiness graph);
            K, the CS rule, the BC mode and δ come from ``summary.settings``.
        ppl: The document's per-sentence scores under a language model, drawn with the θ of
            the first perplexity configuration (else the ``ppl`` chunker's default).
        curves: What each configuration cut on (:class:`~backend.curves.Curve`), by tag.
        questions: The benchmark's question set (which corpus is this document; the strip of
            what was retrieved where). None: no corpus is known to be this document.
        models: The models by role (``lm``, ``embedder``, ``chat``) → name and fingerprint;
            missing roles are read from ``summary.settings`` and the data.
        created: When the report was made (default: now, UTC); the only varying part.
        tuning: A tuning run's answer: its section (:func:`~backend.report.tuning.tuning_section`,
            id ``tuning``) follows the others. None: no such section.

    Returns:
        The HTML document as one string.
    """
    created = created if created is not None else datetime.now(timezone.utc)
    if created.tzinfo is None:
        created = created.replace(tzinfo=timezone.utc)
    figs = _Figures()
    roles = _models_of(summary, models, benchmark, ppl)
    mine, others = split_benchmark(benchmark, questions, doc) if benchmark is not None else (None, None)
    tolerance = int(summary.settings.get("tolerance", 0) or 0)
    bodies = {
        "verdict": _verdict(summary),
        "table": _table(summary),
        "configurations": _configurations(summary, doc, chunkings, roles),
        "boundaries": _boundaries(summary, doc, chunkings, figs, tolerance),
        "sizes": _sizes(summary, chunkings, figs),
        "ppl": _ppl(summary, doc, ppl, curves, figs),
        "quality": _quality(summary, quality, figs),
        "retrieval": _retrieval(summary, doc, mine, questions, figs),
    }
    sections = "".join(f'<section id="{sid}"><h2>{title}</h2>{bodies[sid]}</section>' for sid, title in SECTIONS)
    if others is not None:
        sections += _elsewhere(summary, doc, others, questions, figs)
    if tuning is not None:
        sections += tuning_section(tuning, figs.div)
    name = doc.source or summary.doc_name
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="Chunk Lab {_e(__version__)}">'
        f"<title>Chunk Lab report: {_e(name)}</title><style>{_STYLE}</style>"
        f'<script type="text/javascript" id="plotly-js">{plotly_js()}</script></head>'
        f"<body><main>{_header(summary, doc, created)}{sections}"
        f'<footer class="note"><p>Made by Chunk Lab {_e(__version__)} from the document with hash '
        f"<code>{_e(doc.id)}</code>. Plotly's JavaScript is inside this file: it opens with no network.</p>"
        f"</footer>{_json_script('summary-data', summary.to_json())}</main></body></html>\n"
    )


def cached_curves(
    doc: Document, chunkings: Mapping[str, Chunking], lookup: Any
) -> tuple[dict[str, Any], PPLScores | None]:
    """The curves and the document's per-sentence scores the report draws, read from the cache only.

    The one way the CLI's ``report`` and the Summary page's "Download report" find them, so
    both files hold the same figures. ``lookup`` is a cache-only
    :class:`~backend.chunkers.context.ModelContext` (``ModelContext.cache_only``) of the
    session's models, or None; a curve or the scores that no run produced are left out (the
    report says "not computed yet").

    Returns:
        ``(curves by tag, ppl)``.
    """
    curves: dict[str, Any] = {}
    ppl = None
    if lookup is None:
        return curves, ppl
    for tag, ch in chunkings.items():
        chunker = make_chunker(ch.config.name, ch.config.params_dict, ch.config.tokenizer)
        if not chunker.has_curve():
            continue
        try:
            curve = chunker.curve(doc, lookup)
        except (NotCached, ModelError):
            continue
        if curve:
            curves[tag] = curve
    info = lookup.scorer.info if lookup.scorer is not None else None
    if info is not None:
        try:
            ppl = PPLScores.build(doc, lookup.token_scores(doc.text), info.fingerprint, info.name)
        except NotCached:
            ppl = None
    return curves, ppl
