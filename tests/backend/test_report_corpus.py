"""The corpus verdict and the one-file corpus report, on hand-made rows of ``results.jsonl``."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from html.parser import HTMLParser

from backend.corpus.results import CorpusResults
from backend.report.corpus import CORPUS_SECTIONS, corpus_report_html, corpus_value, corpus_verdict, interval_text

HOSTILE = '<img src=x onerror="alert(1)">.txt'
A, B = "recursive chunk_size=200", "fixed_token chunk_size=250"


class _Tags(HTMLParser):
    """Every start tag and its attributes (a script's text is not parsed as tags, as in a browser)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


def _estimate(value: float) -> dict:
    return {"estimate": value, "ci_low": value, "ci_high": value, "pairs_scored": 10, "pairs_total": 10,
            "method": "exact"}


def _row(doc: str, tag: str, iou: float, recall: float, bc: float, chunks: int) -> dict:
    spec = A if tag == "A" else B
    return {
        "doc": doc, "doc_id": f"{doc}-id", "chars": 1000, "tag": tag, "config": spec, "label": f"{spec} · cl100k",
        "chunks": chunks, "mean_tokens": 100.0, "median_tokens": 100, "min_tokens": 1, "max_tokens": 200,
        "std_tokens": 1.0, "mean_chars": 400.0, "overlap_chars": 0, "bc": _estimate(bc), "cs_complete": None,
        "cs_incomplete": None, "ds": None,
        "retrieval": {"questions": 2, "recall": recall, "precision": 0.1, "precision_omega": 0.2, "iou": iou},
    }


# IoU: A clearly ahead (the intervals do not overlap); recall and BC: the intervals overlap (tied).
VALUES = [(0.40, 0.20, 0.5, 0.55, 0.90, 0.91), (0.42, 0.22, 0.6, 0.65, 0.92, 0.90),
          (0.44, 0.24, 0.7, 0.75, 0.94, 0.93), (0.46, 0.26, 0.8, 0.85, 0.96, 0.95)]


def _results(rows_extra: tuple = ()) -> CorpusResults:
    rows = []
    for i, (ia, ib, ra, rb, ba, bb) in enumerate(VALUES):
        doc = HOSTILE if i == 0 else f"d{i}.txt"
        rows += [_row(doc, "A", ia, ra, ba, 10 + i), _row(doc, "B", ib, rb, bb, 12 + i)]
    rows.append({"doc": "d9.txt", "doc_id": "x", "chars": 5, "tag": "B", "config": B, "label": f"{B} · cl100k",
                 "error": "B failed <here>"})
    run = {"source": "/data/manuals", "questions": "sample:technical", "pairs": None, "seed": 0,
           "metrics": ["stats", "bc", "retrieval"], "engine": "local", "settings": {"K": 0.8},
           "configs": [{"tag": "A", "spec": A, "label": A}, {"tag": "B", "spec": B, "label": B}]}
    return CorpusResults(run=run, rows=tuple(rows + list(rows_extra)),
                         skipped=({"doc": "broken.pdf", "error": "broken.pdf: not a readable PDF <x>"},))


def test_the_verdict_states_the_best_per_metric_with_its_interval_and_documents_and_ties_when_intervals_overlap():
    assert corpus_verdict(_results()) == [
        "Corpus /data/manuals: 4 documents with rows, 1 file skipped; 2 configurations (A, B); quality metrics exact "
        "(every pair); retrieval on the question set sample:technical, whose questions are about 4 of these documents.",
        "IoU: A is best — A 43.0% (95% interval 38.9%–47.1%, 4 documents) vs B 23.0% (95% interval 18.9%–27.1%, "
        "4 documents); higher is better.",
        "Recall: B and A are tied at the top, their 95% intervals overlapping — B 70.0% (95% interval 49.5%–90.5%, "
        "4 documents) vs A 65.0% (95% interval 44.5%–85.5%, 4 documents); higher is better.",
        "Precision: A and B are tied at the top, their 95% intervals overlapping — A 10.0% (95% interval 10.0%–10.0%, "
        "4 documents) vs B 10.0% (95% interval 10.0%–10.0%, 4 documents); higher is better.",
        "Precision-Ω: A and B are tied at the top, their 95% intervals overlapping — A 20.0% (95% interval "
        "20.0%–20.0%, 4 documents) vs B 20.0% (95% interval 20.0%–20.0%, 4 documents); higher is better.",
        "BC: A and B are tied at the top, their 95% intervals overlapping — A 0.930 (95% interval 0.889–0.971, "
        "4 documents) vs B 0.923 (95% interval 0.887–0.958, 4 documents); higher is better.",
    ]


def test_the_verdict_of_one_configuration_or_of_statistics_only_singles_out_nobody():
    only_a = CorpusResults(run={"source": "c"}, rows=tuple(r for r in _results().rows if r["tag"] == "A"), skipped=())
    assert corpus_verdict(only_a)[1:] == ["Only one configuration: nothing to compare."]
    stats = [{k: v for k, v in r.items() if k not in ("bc", "retrieval")} | {"bc": None, "retrieval": None}
             for r in _results().rows if "error" not in r]
    lines = corpus_verdict(CorpusResults(run={"source": "c"}, rows=tuple(stats), skipped=()))
    assert lines == [
        "Corpus c: 4 documents with rows; 2 configurations (A, B).",
        "None of the metrics computed (Chunks and Mean chunk tokens) is better higher or lower: nothing singles out a "
        "configuration.",
    ]
    assert corpus_verdict(CorpusResults(run={}, rows=(), skipped=())) == [
        "Corpus unknown: 0 documents with rows; 0 configurations ().", "No document has rows yet: nothing to compare."]


def test_a_mean_on_one_document_has_no_interval_and_cannot_be_called_best():
    one = CorpusResults(run={"source": "c"}, rows=tuple(_results().rows[:2]), skipped=())
    lines = corpus_verdict(one)
    assert lines[1] == ("IoU: A and B cannot be told apart, a mean over one document having no interval — A 40.0% "
                        "(no interval: 1 document) vs B 20.0% (no interval: 1 document); higher is better.")


def test_values_and_intervals_read_as_the_table_writes_them():
    assert [corpus_value("iou", 0.4213), corpus_value("bc", 0.91234), corpus_value("chunks", 12.34),
            corpus_value("mean_tokens", 1234.56), corpus_value("cs_complete", None)] == [
        "42.1%", "0.912", "12.3", "1234.6", "—"]
    assert interval_text({"metric": "iou", "ci_low": 0.1, "ci_high": 0.2, "documents": 3}) == "10.0%–20.0%"
    assert interval_text({"metric": "iou", "ci_low": None, "ci_high": None, "documents": 1}) == \
        "no interval (1 document)"


def test_the_report_has_every_section_escapes_document_names_and_opens_offline():
    created = datetime(2026, 11, 27, 6, 0, tzinfo=UTC)
    page = corpus_report_html(_results(), created=created)
    for sid, heading in CORPUS_SECTIONS:
        assert f'<section id="{sid}"><h2>{heading}</h2>' in page
    assert HOSTILE not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;.txt" in page
    assert "<here>" not in page and "B failed &lt;here&gt;" in page
    assert "broken.pdf: not a readable PDF &lt;x&gt;" in page
    assert "IoU: A is best — A 43.0% (95% interval 38.9%–47.1%, 4 documents)" in page
    assert 'id="aggregate-table"' in page and 'id="disagreements-iou"' in page and 'id="skipped-files"' in page
    assert page.count('class="figure"') == 7  # chunks, mean tokens, BC, recall, precision, precision-Ω, IoU
    tags = _Tags()
    tags.feed(page)
    assert [(t, a) for t, a in tags.found if (a.get("src") or a.get("href") or "").startswith(("http", "//"))] == []
    assert [t for t, a in tags.found if t in ("link", "img", "iframe") or (t == "script" and a.get("src"))] == []
    data = json.loads(re.search(r'<script type="application/json" id="corpus-data">(.*?)</script>', page).group(1))
    assert data["verdict"] == corpus_verdict(_results())
    assert corpus_report_html(_results(), created=created) == page  # the same results give the same bytes
    assert corpus_report_html(_results(), title="Manuals <Q4>", created=created).count("Manuals &lt;Q4&gt;") == 2
