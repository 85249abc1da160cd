"""A corpus run's verdict and its one-file HTML report.

:func:`corpus_verdict` says, in sentences, only what the aggregate table
(:func:`backend.corpus.aggregate.aggregate_table`) holds: which configuration has the best mean of
each metric that has a better direction, with its 95% interval and the number of documents the
mean stands on, and that configurations are tied when their intervals overlap the best one's.
Its first sentence names the corpus, how many documents gave rows and which question set the
retrieval numbers are about.

:func:`corpus_report_html` is the page's "Download the report" and ``python -m backend corpus …
--report FILE``: the header (corpus, documents, skipped files with their reasons,
configurations, settings), the verdict, the aggregate table, one distribution figure per metric,
the documents where the configurations disagree most and the configurations' errors. It is drawn
in the Summary report's page (:func:`backend.report.html.standalone_page`: one file, plotly.js
inside, opens offline); document names and labels are escaped.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from backend import __version__
from backend.corpus.aggregate import AGGREGATE_METRICS, aggregate_table, disagreements, metric_values
from backend.corpus.results import CorpusResults
from backend.figures.corpus import distribution_figure, html_table, tag_color
from backend.figures.export import figure_div
from backend.report.html import standalone_page
from backend.report.summary import format_value

__all__ = ["CORPUS_SECTIONS", "corpus_report_html", "corpus_value", "corpus_verdict", "interval_text"]

# The report's sections, in order: (element id, heading); each is always there (an empty one says so).
CORPUS_SECTIONS = (
    ("verdict", "Verdict"),
    ("table", "The numbers per configuration"),
    ("distributions", "Distributions over the documents"),
    ("disagreements", "Where the configurations disagree most"),
    ("skipped", "Files skipped and configuration errors"),
)
# How a metric's values are written: the Summary's format of the same quantity (None: one decimal).
_FORMAT_AS = {"chunks": None, "mean_tokens": "tokens_mean", "bc": "bc", "cs_complete": "cs", "cs_incomplete": "cs",
              "ds": "ds", "recall": "recall", "precision": "precision", "precision_omega": "precision_omega",
              "iou": "iou"}
DISAGREEMENTS_SHOWN = 10


def corpus_value(metric: str, value: float | None) -> str:
    """A mean, bound or value of ``metric`` as the table writes it: ``42.1%``, ``0.912``, ``12.3``; ``—`` for None.

    >>> [corpus_value("iou", 0.4213), corpus_value("bc", 0.91234), corpus_value("chunks", 12.34)]
    ['42.1%', '0.912', '12.3']
    """
    if value is None or not math.isfinite(value):
        return "—"
    as_ = _FORMAT_AS.get(metric)
    return f"{value:,.1f}" if as_ is None else format_value(as_, value)


def interval_text(row: Mapping[str, Any]) -> str:
    """An aggregate row's 95% interval: ``38.0%–46.2%``, or ``no interval (one document)``."""
    if row.get("ci_low") is None or row.get("ci_high") is None:
        return f"no interval ({row['documents']} document{'s' if row['documents'] != 1 else ''})"
    return f"{corpus_value(row['metric'], row['ci_low'])}–{corpus_value(row['metric'], row['ci_high'])}"


def _names(tags: Sequence[str]) -> str:
    return tags[0] if len(tags) == 1 else f"{', '.join(tags[:-1])} and {tags[-1]}"


def _cited(row: Mapping[str, Any]) -> str:
    """``B 42.1% (95% interval 38.0%–46.2%, 200 documents)``."""
    n = row["documents"]
    if row.get("ci_low") is None:
        return f"{row['tag']} {corpus_value(row['metric'], row['mean'])} (no interval: {n} document{'s' if n != 1 else ''})"
    return (f"{row['tag']} {corpus_value(row['metric'], row['mean'])} (95% interval {interval_text(row)}, "
            f"{n} document{'s' if n != 1 else ''})")


def _overlaps(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two rows' intervals overlap (a row with no interval overlaps everything: it cannot be told apart)."""
    if a.get("ci_low") is None or b.get("ci_low") is None:
        return True
    return a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"]


def _metric_sentence(metric: str, rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The best configuration on ``metric`` (or the tie at the top), every configuration cited; None below two."""
    info = AGGREGATE_METRICS[metric]
    if info.higher_better is None or len(rows) < 2:
        return None
    ordered = sorted(rows, key=lambda r: ((-r["mean"] if info.higher_better else r["mean"]), r["tag"]))
    best = ordered[0]
    tied = [r for r in ordered[1:] if _overlaps(best, r)]
    way = "higher is better" if info.higher_better else "lower is better"
    name = info.label.rstrip(" ↑↓")
    cited = " vs ".join(_cited(r) for r in ordered)
    if tied:
        top = [best["tag"], *(r["tag"] for r in tied)]
        who = f"all {len(top)} configurations are" if len(top) == len(ordered) > 2 else f"{_names(top)} are"
        if any(r.get("ci_low") is None for r in (best, *tied)):
            return (f"{name}: {_names(top)} cannot be told apart, a mean over one document having no interval — "
                    f"{cited}; {way}.")
        return f"{name}: {who} tied at the top, their 95% intervals overlapping — {cited}; {way}."
    return f"{name}: {best['tag']} is best — {cited}; {way}."


def _scope_sentence(results: CorpusResults, table: Sequence[Mapping[str, Any]]) -> str:
    """Which corpus, how many documents gave rows, how many files were skipped, which question set."""
    run = results.run
    docs = len({r["doc"] for r in results.rows if r.get("error") is None})
    skipped = len(results.skipped)
    tags = sorted({r["tag"] for r in results.rows}, key=lambda t: (len(t), t))
    text = (f"Corpus {run.get('source') or 'unknown'}: {docs} document{'s' if docs != 1 else ''} with rows"
            f"{f', {skipped} file' + ('s' if skipped != 1 else '') + ' skipped' if skipped else ''}; "
            f"{len(tags)} configuration{'s' if len(tags) != 1 else ''} ({', '.join(tags)})")
    pairs = run.get("pairs")
    if any(r["metric"] in ("bc", "cs_complete", "cs_incomplete", "ds") for r in table):
        text += ("; quality metrics exact (every pair)" if not pairs
                 else f"; quality metrics estimated from at least {pairs:,} pairs per document (seed {run.get('seed', 0)})")
    if run.get("questions"):
        on = {r["doc"] for r in results.rows if isinstance(r.get("retrieval"), Mapping)
              and int(r["retrieval"].get("questions") or 0) > 0}
        text += (f"; retrieval on the question set {run['questions']}, whose questions are about "
                 f"{len(on)} of these documents")
    return text + "."


def corpus_verdict(results: CorpusResults) -> list[str]:
    """What the aggregate table shows, in sentences, deterministic; never more than the table holds.

    First the scope (corpus, documents with rows, files skipped, configurations, how exact the
    quality metrics are, which question set retrieval is about), then per metric with a better
    direction (IoU, recall, precision, precision-Ω, BC, CS) the best configuration's mean with its
    95% interval and document count, every other configuration cited the same way; when the best
    one's interval overlaps another's, they are "tied at the top". A metric with fewer than two
    configurations says nothing. Rows of failed configurations are left out.
    """
    rows = [r for r in results.rows if r.get("error") is None]
    table = aggregate_table(rows) if rows else []
    out = [_scope_sentence(results, table)]
    if not table:
        return out + ["No document has rows yet: nothing to compare."]
    by_metric: dict[str, list[Mapping[str, Any]]] = {}
    for r in table:
        by_metric.setdefault(r["metric"], []).append(r)
    order = ("iou", "recall", "precision", "precision_omega", "bc", "cs_complete", "cs_incomplete")
    sentences = [s for m in order if m in by_metric for s in [_metric_sentence(m, by_metric[m])] if s is not None]
    if not sentences:
        n = len({r["tag"] for r in table})
        shown = _names([AGGREGATE_METRICS[m].label.rstrip(" ↑↓") for m in AGGREGATE_METRICS if m in by_metric])
        sentences = ["Only one configuration: nothing to compare." if n < 2 else
                     f"None of the metrics computed ({shown}) is better higher or lower: nothing singles out a "
                     "configuration."]
    return out + sentences


# --- the report --------------------------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _header(results: CorpusResults, title: str, created: datetime) -> str:
    run = results.run
    when = created.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    docs = len({r["doc"] for r in results.rows})
    configs = "".join(
        f'<li><span class="tag" style="background:{tag_color(c["tag"])}">{_e(c["tag"])}</span> '
        f"<code>{_e(c['spec'])}</code></li>" for c in run.get("configs", [])
        if any(r["config"] == c["spec"] for r in results.rows)
    )
    settings = run.get("settings") or {}
    setting_text = ", ".join(f"{k} {v}" for k, v in settings.items())
    models = f"language model {run.get('lm') or 'the default'}, embedder {run.get('embedder') or 'the default'}"
    pairs = run.get("pairs")
    budget = "every pair (exact)" if not pairs else f"a budget of {pairs:,} pairs per document (seed {run.get('seed', 0)})"
    return (
        f'<header id="corpus"><h1>{_e(title)}</h1>'
        f'<p class="meta">Corpus <b>{_e(run.get("source") or "unknown")}</b> · {docs:,} document'
        f"{'s' if docs != 1 else ''} with rows · {len(results.skipped):,} file{'s' if len(results.skipped) != 1 else ''} "
        f"skipped · metrics {_e(', '.join(run.get('metrics', [])))} · "
        f"{budget}"
        f" · question set {_e(run.get('questions') or 'none')} · engine {_e(run.get('engine') or 'unknown')}<br>"
        f"Quality settings: {_e(setting_text or 'defaults')} · {_e(models)}<br>"
        f'Made <time datetime="{_e(created.astimezone(UTC).isoformat())}">{_e(when)}</time> by Chunk Lab '
        f'<span id="version">{_e(__version__)}</span></p>'
        f"<h3>Configurations</h3><ul>{configs}</ul></header>"
    )


def _table(table: Sequence[Mapping[str, Any]]) -> str:
    if not table:
        return '<p class="note">No document has rows yet.</p>'
    rows = [
        (AGGREGATE_METRICS[r["metric"]].label, r["tag"], r["label"], r["documents"], corpus_value(r["metric"], r["mean"]),
         interval_text(r), corpus_value(r["metric"], r["std"]), corpus_value(r["metric"], r["min"]),
         corpus_value(r["metric"], r["median"]), corpus_value(r["metric"], r["max"]))
        for r in sorted(table, key=lambda r: (list(AGGREGATE_METRICS).index(r["metric"]), len(r["tag"]), r["tag"]))
    ]
    columns = ("Metric", "", "Configuration", "Documents", "Mean", "95% interval", "Std", "Min", "Median", "Max")
    return html_table(columns, rows, element_id="aggregate-table", badges={1: "tag"},
                      numeric=[False, False, False, True, True, True, True, True, True, True]) + (
        '<p class="note">Each mean is over the documents where the configuration has a value (how many: '
        "Documents); its 95% interval is a Student-t interval over those documents, widened by the documents' own "
        "intervals when the quality metrics are estimates under a pair budget. Retrieval numbers are over the "
        "documents the question set has questions about.</p>")


def _distributions(results: CorpusResults, metrics: Sequence[str], labels: Mapping[str, str]) -> str:
    if not metrics:
        return '<p class="note">No document has rows yet.</p>'
    values = metric_values([r for r in results.rows if r.get("error") is None])
    parts = []
    for i, m in enumerate(metrics, start=1):
        fig = distribution_figure(values, m, AGGREGATE_METRICS[m].label, kind="box", labels=labels)
        parts.append(f'<h3>{_e(AGGREGATE_METRICS[m].label)}</h3><div class="figure">{figure_div(fig, f"figure-{i}")}</div>')
    return "".join(parts)


def _disagreements(results: CorpusResults, metrics: Sequence[str], tags: Sequence[str]) -> str:
    rows = [r for r in results.rows if r.get("error") is None]
    parts = []
    for m in metrics:
        found = disagreements(rows, m, top=DISAGREEMENTS_SHOWN)
        if not found:
            continue
        cells = [(d["doc"], *(corpus_value(m, d["values"].get(t)) for t in tags), corpus_value(m, d["spread"]),
                  f"{d['scaled_spread']:.2f}", d["best"], d["worst"]) for d in found]
        columns = ("Document", *tags, "Spread", "Spread / corpus std", "Best here", "Worst here")
        numeric = [False, *([True] * len(tags)), True, True, False, False]
        parts.append(f"<h3>{_e(AGGREGATE_METRICS[m].label)}</h3>"
                     + html_table(columns, cells, element_id=f"disagreements-{m}", numeric=numeric,
                                  badges={len(tags) + 3: "tag", len(tags) + 4: "tag"}))
    if not parts:
        return '<p class="note">No document has values from two configurations or more yet.</p>'
    return ('<p class="note">The documents where the configurations\' values differ most, in units of the '
            f"metric's standard deviation over the corpus (at most {DISAGREEMENTS_SHOWN} per metric).</p>"
            + "".join(parts))


def _skipped(results: CorpusResults) -> str:
    errors = [(r["doc"], r["tag"], r["error"]) for r in results.rows if r.get("error") is not None]
    out = []
    if results.skipped:
        out.append(html_table(("File", "Why it was skipped"), [(s["doc"], s.get("error", "")) for s in results.skipped],
                              element_id="skipped-files"))
    else:
        out.append('<p class="note">No file was skipped.</p>')
    if errors:
        out.append(html_table(("Document", "Configuration", "Error"), errors, element_id="config-errors",
                              badges={1: "tag"}))
    return "".join(out)


def corpus_report_html(results: CorpusResults, *, title: str | None = None, created: datetime | None = None) -> str:
    """The one-file HTML report of a corpus run (the sections of :data:`CORPUS_SECTIONS`).

    Args:
        results: The output folder read with :func:`~backend.corpus.results.read_results`.
        title: The report's title (default ``Chunk Lab corpus report: <corpus>``).
        created: When it was made (default now, UTC): the only part that varies for the same results.

    Returns:
        The HTML document as one string.
    """
    created = created if created is not None else datetime.now(UTC)
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    title = title or f"Chunk Lab corpus report: {results.run.get('source') or 'corpus'}"
    good = [r for r in results.rows if r.get("error") is None]
    table = aggregate_table(good) if good else []
    metrics = [m for m in AGGREGATE_METRICS if any(r["metric"] == m for r in table)]
    labels: dict[str, str] = {}
    for r in sorted(results.rows, key=lambda r: (len(r["tag"]), r["tag"])):
        labels.setdefault(r["tag"], r["label"])
    tags = list(labels)
    lines = corpus_verdict(results)
    bodies = {
        "verdict": '<ul class="verdict">' + "".join(f"<li>{_e(s)}</li>" for s in lines) + "</ul>",
        "table": _table(table),
        "distributions": _distributions(results, metrics, labels),
        "disagreements": _disagreements(results, metrics, tags),
        "skipped": _skipped(results),
    }
    sections = "".join(f'<section id="{sid}"><h2>{_e(head)}</h2>{bodies[sid]}</section>' for sid, head in CORPUS_SECTIONS)
    footer = (f'<footer class="note"><p>Made by Chunk Lab {_e(__version__)} from the output folder of a corpus run. '
              "Plotly's JavaScript is inside this file: it opens with no network.</p></footer>")
    data = {"verdict": lines, "table": table, "skipped": list(results.skipped), "run": dict(results.run)}
    return standalone_page(title, _header(results, title, created) + sections + footer, data_id="corpus-data", data=data)
