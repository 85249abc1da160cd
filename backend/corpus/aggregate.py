"""A corpus run's numbers per configuration: the aggregate table, the distributions, the disagreements.

Everything here reads the rows of ``results.jsonl`` (:func:`backend.corpus.results.read_results`),
so the CLI, the Corpus page and the report show the same numbers.

The interval of a mean over documents is a 95% Student-t interval over the documents (the corpus
taken as a sample of documents like these), widened by the documents' own estimation error when
their quality metrics are estimates under a pair budget: with per-document values ``x_i`` (``n``
documents, sample standard deviation ``s``) and per-document standard errors ``e_i`` (the half-width
of each document's own 95% interval / 1.96; 0 when exact), the standard error of the mean is
``sqrt(s²/n + Σ e_i² / n²)``. One document gives no interval over documents: its row carries the
document's own interval when its value is an estimate, else none (``ci_low``/``ci_high`` None).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from backend.corpus.results import CorpusResults
from backend.corpus.work import QUALITY_COLUMNS, RETRIEVAL_COLUMNS
from backend.metrics.estimate import t_quantile

__all__ = [
    "AGGREGATE_METRICS",
    "CorpusProgress",
    "MetricInfo",
    "aggregate_table",
    "corpus_progress",
    "disagreements",
    "metric_values",
]

_Z = 1.959963984540054


@dataclass(frozen=True)
class MetricInfo:
    """How a metric reads: its label, which way is better (None: neither), its unit."""

    label: str
    higher_better: bool | None
    unit: str = ""


AGGREGATE_METRICS: dict[str, MetricInfo] = {
    "chunks": MetricInfo("Chunks", None, "chunks"),
    "mean_tokens": MetricInfo("Mean chunk tokens", None, "tokens"),
    "bc": MetricInfo("BC ↑", True),
    "cs_complete": MetricInfo("CS complete ↓", False),
    "cs_incomplete": MetricInfo("CS incomplete ↓", False),
    "ds": MetricInfo("DS", None),
    "recall": MetricInfo("Recall ↑", True),
    "precision": MetricInfo("Precision ↑", True),
    "precision_omega": MetricInfo("Precision-Ω ↑", True),
    "iou": MetricInfo("IoU ↑", True),
}
_COLUMNS = ["doc", "tag", "config", "label", "metric", "value", "ci_low", "ci_high", "exact"]


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def metric_values(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One line per (document, configuration, metric) with a value: ``doc, tag, config, label, metric, value,
    ci_low, ci_high, exact`` (the interval is the document's own: equal ends when exact).

    Rows with an ``error``, metrics not computed, and retrieval on a document without questions give no line.
    """
    out: list[tuple[Any, ...]] = []
    for r in rows:
        if r.get("error") is not None:
            continue
        head = (r["doc"], r["tag"], r["config"], r["label"])
        for m in ("chunks", "mean_tokens"):
            v = _finite(r.get(m))
            if v is not None:
                out.append((*head, m, v, v, v, True))
        for m in QUALITY_COLUMNS:
            est = r.get(m)
            v = _finite(est.get("estimate")) if isinstance(est, Mapping) else None
            if v is None:
                continue
            lo, hi = _finite(est.get("ci_low")), _finite(est.get("ci_high"))
            exact = int(est.get("pairs_scored") or 0) >= int(est.get("pairs_total") or 0)
            out.append((*head, m, v, v if lo is None else lo, v if hi is None else hi, exact))
        ret = r.get("retrieval")
        if isinstance(ret, Mapping) and int(ret.get("questions") or 0) > 0:
            for m in RETRIEVAL_COLUMNS:
                v = _finite(ret.get(m))
                if v is not None:
                    out.append((*head, m, v, v, v, True))
    return pd.DataFrame(out, columns=_COLUMNS)


def _config_order(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    seen: dict[str, tuple[str, str, str]] = {}
    for r in rows:
        seen.setdefault(r["config"], (r["tag"], r["config"], r["label"]))
    return sorted(seen.values(), key=lambda t: (len(t[0]), t[0], t[1]))


def aggregate_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One dict per (configuration, metric) with values: ``{"tag", "config", "label", "metric", "documents",
    "mean", "std", "ci_low", "ci_high", "min", "median", "max", "estimated"}`` in configuration then
    :data:`AGGREGATE_METRICS` order.

    ``std`` is the sample standard deviation over documents (None for one); ``ci_low``/``ci_high``
    the 95% interval of the mean (module docstring); ``estimated`` counts the documents whose value is
    an estimate under a pair budget.
    """
    values = metric_values(rows)
    out: list[dict[str, Any]] = []
    for tag, config, label in _config_order(rows):
        mine = values[values["config"] == config]
        for metric in AGGREGATE_METRICS:
            part = mine[mine["metric"] == metric]
            if part.empty:
                continue
            x = part["value"].to_numpy(dtype=np.float64)
            half = np.maximum(part["ci_high"].to_numpy(dtype=np.float64) - x, x - part["ci_low"].to_numpy(dtype=np.float64))
            se_doc = half / _Z
            n = int(x.size)
            mean = float(x.mean())
            if n > 1:
                std = float(x.std(ddof=1))
                se = math.sqrt(std**2 / n + float((se_doc**2).sum()) / n**2)
                h = t_quantile(n - 1) * se
                lo, hi = mean - h, mean + h
            else:
                std = None
                exact = bool(part["exact"].iloc[0])
                lo, hi = (None, None) if exact else (float(part["ci_low"].iloc[0]), float(part["ci_high"].iloc[0]))
            out.append({
                "tag": tag, "config": config, "label": label, "metric": metric, "documents": n, "mean": mean,
                "std": std, "ci_low": lo, "ci_high": hi, "min": float(x.min()), "median": float(np.median(x)),
                "max": float(x.max()), "estimated": int((~part["exact"].to_numpy(dtype=bool)).sum()),
            })
    return out


def disagreements(rows: Sequence[Mapping[str, Any]], metric: str, top: int = 10) -> list[dict[str, Any]]:
    """The documents where the configurations' values of ``metric`` differ most, most first.

    Each: ``{"doc", "spread", "scaled_spread", "best", "worst", "best_overall", "values": {tag: value}}``:
    ``spread`` is the largest minus the smallest value on this document, ``scaled_spread`` the same
    in units of the metric's standard deviation over every (document, configuration) value of the
    corpus (so metrics compare), ``best``/``worst`` the tags at either end (for a metric without a
    better direction, the largest and the smallest), ``best_overall`` the tag with the best mean over
    the corpus. Only documents where at least two configurations have a value count.
    """
    values = metric_values(rows)
    part = values[values["metric"] == metric]
    if part.empty:
        return []
    info = AGGREGATE_METRICS.get(metric, MetricInfo(metric, None))
    sign = -1.0 if info.higher_better is False else 1.0
    overall = part.groupby("tag")["value"].mean() * sign
    best_overall = str(overall.idxmax()) if not overall.empty else None
    scale = float(part["value"].std(ddof=1)) if len(part) > 1 else 0.0
    out = []
    for doc, group in part.groupby("doc", sort=True):
        if group["tag"].nunique() < 2:
            continue
        by_tag = dict(zip(group["tag"], group["value"], strict=True))
        ordered = sorted(by_tag, key=lambda t: (-sign * by_tag[t], t))
        spread = float(max(by_tag.values()) - min(by_tag.values()))
        out.append({
            "doc": str(doc), "spread": spread, "scaled_spread": spread / scale if scale > 0 else 0.0,
            "best": ordered[0], "worst": ordered[-1], "best_overall": best_overall,
            "values": {t: float(by_tag[t]) for t in sorted(by_tag, key=lambda t: (len(t), t))},
        })
    out.sort(key=lambda d: (-d["scaled_spread"], d["doc"]))
    return out[:top]


@dataclass(frozen=True)
class CorpusProgress:
    """How far a run's output folder is: documents with every configuration's row, out of the corpus.

    Attributes:
        documents_done: Documents with a row for every configuration of ``run.json``.
        documents_total: Documents in the corpus (given by the caller; None unknown).
        rows: Rows written.
        errors: Rows whose configuration failed on the document.
        skipped: Files skipped.
    """

    documents_done: int
    documents_total: int | None
    rows: int
    errors: int
    skipped: int

    def line(self) -> str:
        """``12 of 200 documents done (24 rows, 1 error); 2 files skipped``."""
        total = f" of {self.documents_total}" if self.documents_total is not None else ""
        errors = f", {self.errors} error{'s' if self.errors != 1 else ''}" if self.errors else ""
        skipped = f"; {self.skipped} file{'s' if self.skipped != 1 else ''} skipped" if self.skipped else ""
        return f"{self.documents_done}{total} documents done ({self.rows} rows{errors}){skipped}"


def corpus_progress(results: CorpusResults, total_documents: int | None = None) -> CorpusProgress:
    """The :class:`CorpusProgress` of an output folder read with ``read_results``."""
    configs = {c["spec"] for c in results.run.get("configs", [])}
    per_doc: dict[str, set[str]] = {}
    for r in results.rows:
        per_doc.setdefault(r["doc"], set()).add(r["config"])
    done = sum(1 for specs in per_doc.values() if configs and configs <= specs)
    errors = sum(1 for r in results.rows if r.get("error") is not None)
    return CorpusProgress(done, total_documents, len(results.rows), errors, len(results.skipped))
