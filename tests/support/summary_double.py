"""A stand-in for ``backend.report.summary`` while that module is written on another branch.

:func:`install` puts this module in ``sys.modules`` under that name only when the real one is
missing, so the report's tests run against the contract today and against the real module once
both are merged (the double is then never used). It follows the contract: ``METRICS``,
``METRIC_INFO``, ``ConfigSummary``, ``Summary`` (``best``, ``missing``, ``to_json``), ``verdict``
and ``collect`` (model-free numbers and, with a question set, retrieval).
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple

from backend.chunking import ChunkerConfig

METRICS = ("chunks", "tokens_mean", "tokens_std", "seconds", "bc", "cs", "recall", "iou")


class MetricInfo(NamedTuple):
    label: str
    help: str
    higher_is_better: bool | None
    fmt: str


METRIC_INFO = {
    "chunks": MetricInfo("Chunks", "How many chunks the configuration cut.", None, "{:,d}"),
    "tokens_mean": MetricInfo("Mean tokens", "The mean chunk length in tokens.", None, "{:.1f}"),
    "tokens_std": MetricInfo("Std tokens", "How much chunk lengths vary.", None, "{:.1f}"),
    "seconds": MetricInfo("Time (s)", "How long chunking took.", False, "{:.3f}"),
    "bc": MetricInfo("BC", "Boundary clarity: higher means cleaner cuts.", True, "{:.3f}"),
    "cs": MetricInfo("CS", "Chunk stickiness: lower means more independent chunks.", False, "{:.3f}"),
    "recall": MetricInfo("Recall", "Share of the answers' text retrieved.", True, "{:.1%}"),
    "iou": MetricInfo("IoU", "Overlap of retrieved text and answers.", True, "{:.1%}"),
}


def format_value(metric: str, value: float | None) -> str:
    if value is None:
        return "—"
    fmt = METRIC_INFO[metric].fmt
    return fmt.format(int(value)) if fmt.endswith("d}") else fmt.format(value)


@dataclass(frozen=True)
class ConfigSummary:
    tag: str
    config: ChunkerConfig
    values: Mapping[str, float | None]
    notes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Summary:
    doc_name: str
    doc_id: str
    rows: tuple[ConfigSummary, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)

    def best(self, metric: str) -> str | None:
        better = METRIC_INFO[metric].higher_is_better
        known = [(r.values.get(metric), r.tag) for r in self.rows if r.values.get(metric) is not None]
        if better is None or len(known) < 2:
            return None
        return (max if better else min)(known)[1]

    def missing(self) -> dict[str, list[str]]:
        groups = {"quality": ("bc", "cs"), "retrieval": ("recall", "iou")}
        out = {g: [r.tag for r in self.rows if any(r.values.get(m) is None for m in ms)] for g, ms in groups.items()}
        return {g: tags for g, tags in out.items() if tags}

    def to_json(self) -> dict[str, Any]:
        return {
            "doc_name": self.doc_name,
            "doc_id": self.doc_id,
            "settings": dict(self.settings),
            "rows": [{"tag": r.tag, "config": r.config.to_json(), "values": dict(r.values)} for r in self.rows],
        }


def verdict(summary: Summary) -> list[str]:
    lines = []
    for m in METRICS:
        tag = summary.best(m)
        if tag is not None:
            lines.append(f"{tag} has the best {METRIC_INFO[m].label}.")
    return lines


def collect(doc, tagged_configs, *, context=None, question_set=None, embedder_spec=None, K=0.8, delta=0,
            window=None, cs_rule="paper", bc_mode="reference", retrieve=5, compute=False, progress=None,
            benchmark=None, question_set_name=None) -> Summary:
    from backend.chunkers import run_chunker

    values: dict[str, dict[str, float | None]] = {}
    for tag, config in tagged_configs:
        ch = run_chunker(doc, config, context)
        counts = ch.token_counts
        values[tag] = {
            "chunks": len(counts), "tokens_mean": statistics.fmean(counts), "tokens_std": statistics.pstdev(counts),
            "seconds": ch.elapsed_s, "bc": None, "cs": None, "recall": None, "iou": None,
        }
    bm = benchmark
    if bm is None and question_set is not None and compute:
        from backend.retrieval.evaluate import evaluate

        bm = evaluate(question_set, [c for _, c in tagged_configs], embedder=embedder_spec, retrieve=retrieve,
                      context=context, progress=progress)
    if bm is not None:
        for (tag, _), r in zip(tagged_configs, bm.results):
            values[tag].update(recall=r.summary.recall_mean, iou=r.summary.iou_mean)
    rows = tuple(ConfigSummary(tag, config, values[tag]) for tag, config in tagged_configs)
    settings = {"K": K, "delta": delta, "window": window, "cs_rule": cs_rule, "bc_mode": bc_mode, "retrieve": retrieve,
                "question_set": question_set_name}
    return Summary(doc.source, doc.id, rows, settings)


def install() -> None:
    """Make ``backend.report.summary`` importable: the real module when it exists, else this double."""
    if importlib.util.find_spec("backend.report.summary") is None:
        sys.modules["backend.report.summary"] = sys.modules[__name__]
