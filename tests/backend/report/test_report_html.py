"""The one-file HTML report: every section, nothing fetched from a network, plotly.js once, document text escaped."""

from __future__ import annotations

import html
import json
import math
import tomllib
from datetime import datetime, timezone
from html.parser import HTMLParser

import numpy as np
import pytest

import backend  # noqa: E402
from backend.chunkers import run_chunker  # noqa: E402
from backend.chunkers.meta.results import PPLScores  # noqa: E402
from backend.chunking import ChunkerConfig  # noqa: E402
from backend.curves import Curve  # noqa: E402
from backend.figures.export import plotly_js  # noqa: E402
from backend.metrics.estimate import Estimate, exact_estimate  # noqa: E402
from backend.metrics.report import QualityData  # noqa: E402
from backend.models.scoring import SentenceScore  # noqa: E402
from backend.report.html import ELSEWHERE_SECTION, NOT_COMPUTED, SECTIONS, report_html  # noqa: E402
from backend.report.summary import METRIC_INFO, METRICS, ConfigSummary, Summary, summarize, verdict  # noqa: E402
from backend.retrieval.evaluate import Benchmark, ConfigResult, MetricSummary, QuestionResult  # noqa: E402
from backend.retrieval.questions import Question, QuestionSet, Reference  # noqa: E402
from backend.text.document import Document  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.support.quality import random_table  # noqa: E402

PAYLOAD = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
CREATED = datetime(2026, 11, 25, 9, 30, tzinfo=timezone.utc)


class Page(HTMLParser):
    """Every start tag with its attributes, the text of each ``<script>``, and the ids of the sections."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None
        self._buf: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "script":
            self._in_script, self._buf = attrs, []

    def handle_endtag(self, tag):
        if tag == "script" and self._in_script is not None:
            self.scripts.append((self._in_script, "".join(self._buf)))
            self._in_script = None

    def handle_data(self, data):
        if self._in_script is not None:
            self._buf.append(data)
        else:
            self.text.append(data)

    def ids(self, tag: str) -> list[str]:
        return [a.get("id") or "" for t, a in self.tags if t == tag]


def parse(page: str) -> Page:
    p = Page()
    p.feed(page)
    p.close()
    return p


@pytest.fixture(scope="module")
def doc() -> Document:
    paragraphs = [
        f"Paragraph {i} describes how the lighthouse lamp was trimmed and why the fog horn sounded twice. "
        "Each entry ends with the weather and the keeper on duty."
        for i in range(12)
    ]
    paragraphs.insert(2, f"Raw markup must stay text: {PAYLOAD} & done.")
    return Document.from_text("\n\n".join(paragraphs), source=f"{PAYLOAD}.txt")


@pytest.fixture(scope="module")
def configs() -> list[tuple[str, ChunkerConfig]]:
    return [
        ("A", ChunkerConfig.make("recursive", {"chunk_size": 40})),
        ("B", ChunkerConfig.make("fixed_token", {"chunk_size": 30, "chunk_overlap": 10})),
    ]


def _values(**known: float) -> dict[str, float | None]:
    return {m: known.get(m) for m in METRICS}


def _directed(higher: bool) -> str:
    """A metric whose better direction is ``higher``."""
    return next(m for m in METRICS if METRIC_INFO[m].higher_is_better is higher)


@pytest.fixture(scope="module")
def summary(doc, configs) -> Summary:
    up, down = _directed(True), _directed(False)
    # A hostile parameter value stands in for anything a user can type into a configuration.
    hostile = ChunkerConfig("recursive", (("chunk_size", 40), ("note", PAYLOAD)))
    rows = (
        ConfigSummary("A", hostile, _values(**{up: 0.9, down: 0.2}), {up: PAYLOAD}),
        ConfigSummary("B", configs[1][1], _values(**{up: 0.4})),
    )
    return Summary(doc.source, doc.id, rows, {"K": 0.8, "cs_rule": "paper", "bc_mode": "reference", "lm": PAYLOAD})


@pytest.fixture(scope="module")
def chunkings(doc, configs):
    return {tag: run_chunker(doc, config) for tag, config in configs}


@pytest.fixture(scope="module")
def quality(configs, chunkings):
    return {
        tag: QualityData(tag, config, chunkings[tag], random_table(seed, len(chunkings[tag].chunks)))
        for seed, (tag, config) in enumerate(configs)
    }


@pytest.fixture(scope="module")
def benchmark(configs) -> Benchmark:
    questions = [f"Question {i}: why {PAYLOAD}?" for i in range(4)]
    results = []
    for j, (_, config) in enumerate(configs):
        qs = tuple(
            QuestionResult(i, "doc", q, 0.5 + 0.1 * j, 0.2, 0.3, 0.1 + 0.05 * i, ()) for i, q in enumerate(questions)
        )
        results.append(ConfigResult(config, MetricSummary.of(qs), {}, qs, 10 + j, 40.0, 0.1, False))
    return Benchmark(tuple(results), "all-MiniLM-L6-v2", "f" * 64, 5, len(questions), ("doc",), 1.0)


@pytest.fixture(scope="module")
def questions(doc) -> QuestionSet:
    """The benchmark's four questions, on this document (corpus ``doc``)."""
    return QuestionSet.from_document(
        doc, [Question(f"Question {i}: why {PAYLOAD}?", (Reference(doc.text[:9], 0, 9),), "doc") for i in range(4)],
        "doc",
    )


@pytest.fixture(scope="module")
def ppl(doc) -> PPLScores:
    sentences = tuple(
        SentenceScore(i, s.start, s.end, doc.text[s.start : s.end], 10, nll, math.exp(nll))
        for i, (s, nll) in enumerate(zip(doc.sentences, 2.0 + np.sin(np.arange(len(doc.sentences)))))
    )
    return PPLScores(doc.id, "fp-test", PAYLOAD, sentences)


@pytest.fixture(scope="module")
def curves(doc) -> dict[str, Curve]:
    units = tuple((s.start, s.end) for s in doc.sentences)
    values = 2.0 + np.cos(np.arange(len(units)))
    return {"A": Curve(units, values, "sentence", "mean token NLL", "sentence", (3,), drop_threshold=0.5,
                       candidates=(3,))}


@pytest.fixture(scope="module")
def full(summary, doc, chunkings, quality, benchmark, questions, ppl, curves) -> str:
    return report_html(summary, doc, chunkings, benchmark=benchmark, quality=quality, ppl=ppl, curves=curves,
                       models={"lm": f"SmolLM2 {PAYLOAD}"}, questions=questions, created=CREATED)


def test_every_section_is_there_in_order(full):
    page = parse(full)
    assert page.ids("section") == [sid for sid, _ in SECTIONS]
    assert "document" in page.ids("header")
    # Every section with data draws its figures: one <div> per figure, each drawn by a script.
    figures = [a["id"] for t, a in page.tags if t == "div" and (a.get("id") or "").startswith("figure-")]
    assert len(figures) >= 10
    draws = [text for attrs, text in page.scripts if not attrs.get("id") and "Plotly.newPlot" in text]
    assert len(draws) == len(figures)
    assert NOT_COMPUTED not in "".join(page.text).split("The numbers")[0]  # the header and verdict are all there


def test_nothing_is_fetched_from_a_network(full):
    page = parse(full)
    for tag, attrs in page.tags:
        for name in ("src", "href"):
            value = (attrs.get(name) or "").strip().lower()
            assert not value.startswith(("http://", "https://", "//")), f"<{tag} {name}={value!r}>"
    assert [t for t, _ in page.tags if t in ("link", "img", "iframe")] == []
    assert [a for t, a in page.tags if t == "script" and a.get("src")] == []
    style = "".join(text for text in page.text if "font-family" in text)
    assert "url(" not in style and "@import" not in style


def test_plotly_js_is_inlined_exactly_once(full):
    page = parse(full)
    bundles = [text for attrs, text in page.scripts if attrs.get("id") == "plotly-js"]
    assert len(bundles) == 1 and bundles[0] == plotly_js()
    assert full.count(plotly_js()[:2000]) == 1
    assert sum(len(text) > 1_000_000 for _, text in page.scripts) == 1


def test_document_text_is_escaped_everywhere(full):
    assert PAYLOAD not in full  # not in the markup, not in a figure's JSON, not in the summary's JSON
    assert full.count(ESCAPED) >= 5  # title, header, configuration card, chunk preview, questions, models
    page = parse(full)
    scripts = [attrs for t, attrs in page.tags if t == "script"]
    kinds = {(a.get("id"), a.get("type")) for a in scripts}
    assert kinds <= {("plotly-js", "text/javascript"), (None, None), (None, "text/javascript"),
                     ("summary-data", "application/json")}
    assert all("Plotly.newPlot" in text for attrs, text in page.scripts if not attrs.get("id"))
    texts = "".join(page.text)
    assert f"Chunk Lab report: {PAYLOAD}.txt" in texts  # shown as text, decoded by the parser
    data = json.loads(next(text for attrs, text in page.scripts if attrs.get("id") == "summary-data"))
    assert data["doc_id"] and PAYLOAD in json.dumps(data, ensure_ascii=False)  # \u003c escapes only the markup


def test_header_names_the_document_hash_time_and_version(full, doc):
    page = parse(full)
    texts = "".join(page.text)
    assert doc.id in texts and "2026-11-25 09:30:00 UTC" in texts
    with open(ROOT / "pyproject.toml", "rb") as f:
        version = tomllib.load(f)["project"]["version"]
    assert backend.__version__ == version
    assert f'<span id="version">{version}</span>' in full


def test_the_table_marks_the_best_and_says_what_is_missing(full, summary):
    page = parse(full)
    titles = [a.get("title") for t, a in page.tags if t == "th" and a.get("title")]
    assert titles[: len(METRICS)] == [METRIC_INFO[m].help for m in METRICS]
    best = [a for t, a in page.tags if t == "td" and "best" in (a.get("class") or "")]
    assert len(best) == sum(summary.best(m) is not None for m in METRICS) >= 1
    missing = sum(v is None for r in summary.rows for v in (r.values.get(m) for m in METRICS))
    assert full.count('class="missing"') == missing
    for line in verdict(summary):
        assert line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in full


def test_configurations_show_parameters_and_models(full):
    page = parse(full)
    assert [i for i in page.ids("div") if i.startswith("config-")] == ["config-A", "config-B"]
    texts = "".join(page.text)
    assert "chunk_overlap" in texts and "tokenizer" in texts and "cl100k" in texts
    assert f"SmolLM2 {PAYLOAD}" in texts  # the models given, escaped
    assert "all-MiniLM-L6-v2" in texts  # the benchmark's embedder


def test_deterministic_apart_from_the_timestamp(summary, doc, chunkings, quality, benchmark, ppl, curves):
    def make(created):
        return report_html(summary, doc, chunkings, benchmark=benchmark, quality=quality, ppl=ppl, curves=curves,
                           created=created)

    assert make(CREATED) == make(CREATED)
    later = datetime(2027, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    a, b = make(CREATED), make(later)
    assert a != b and a.replace("2026-11-25T09:30:00+00:00", "").replace("2026-11-25 09:30:00 UTC", "") == b.replace(
        "2027-01-02T03:04:05+00:00", ""
    ).replace("2027-01-02 03:04:05 UTC", "")


def test_sections_without_data_say_not_computed(summary, doc, chunkings):
    page_html = report_html(summary, doc, chunkings, created=CREATED)
    page = parse(page_html)
    assert page.ids("section") == [sid for sid, _ in SECTIONS]
    notes = [a for t, a in page.tags if t == "p" and "missing-data" in (a.get("class") or "")]
    assert len(notes) == 3  # perplexity, quality, retrieval
    assert page_html.count(plotly_js()[:2000]) == 1


def test_figures_keep_plotly_s_template_when_streamlit_set_its_own(summary, doc, chunkings):
    # Importing Streamlit makes its template (colour placeholders only its frontend fills in) the default.
    import plotly.graph_objects as go
    import plotly.io as pio

    before = pio.templates.default
    pio.templates["placeholder-test"] = go.layout.Template(layout={"paper_bgcolor": "#000001"})
    pio.templates.default = "placeholder-test"
    try:
        page = report_html(summary, doc, chunkings, created=CREATED)
    finally:
        pio.templates.default = before
    assert "#000001" not in page
    assert page == report_html(summary, doc, chunkings, created=CREATED)


def test_a_benchmark_on_another_corpus_is_its_own_titled_section(doc, configs, chunkings, benchmark):
    other = "The clockmaker of Harrow Lane wound every clock at noon."
    elsewhere = QuestionSet(
        tuple(Question(f"Question {i}?", (Reference(other[:15], 0, 15),), "doc") for i in range(4)), {"doc": other}
    )
    summary = summarize(doc, [(t, chunkings[t]) for t, _ in configs], benchmark=benchmark, questions=elsewhere,
                        question_set_name="sample:narrative")
    page_html = report_html(summary, doc, chunkings, benchmark=benchmark, questions=elsewhere, created=CREATED)
    page = parse(page_html)
    assert page.ids("section") == [sid for sid, _ in SECTIONS] + [ELSEWHERE_SECTION]
    texts = "".join(page.text)
    assert "Retrieval on the bundled English narrative set, 1 corpus — not this document" in texts
    verdict_text = texts.split("Verdict")[1].split("The numbers")[0]
    assert "IoU (" not in verdict_text and "recall (" not in verdict_text
    table = page_html.split('id="summary-table"')[1].split("</table>")[0]
    assert "%" not in table  # no retrieval number in this document's table
    assert "no benchmark on questions about this document" in texts
    other_table = page_html.split('id="elsewhere-table"')[1].split("</table>")[0]
    assert "50.0%" in other_table and "60.0%" in other_table  # recall of A and B on the other corpus


def test_estimates_show_their_interval_and_pairs_and_the_verdict_respects_them(doc, configs, chunkings):
    """A report made while BC and CS stand on some pairs: ± cells, no ★ between overlapping intervals, the JSON."""
    a_bc, b_bc = Estimate(0.93, 0.90, 0.96, 120, 1747, "t"), Estimate(0.94, 0.91, 0.97, 120, 1747, "t")
    b_cs = Estimate(1.2, 1.1, 1.3, 400, 3000, "bootstrap")
    rows = (
        ConfigSummary("A", configs[0][1], _values(bc=0.93, cs=1.6), {}, {"bc": a_bc, "cs": exact_estimate(1.6, 30)}),
        ConfigSummary("B", configs[1][1], _values(bc=0.94, cs=1.2), {}, {"bc": b_bc, "cs": b_cs}),
    )
    summary = Summary(doc.source, doc.id, rows, {"K": 0.8})
    page = report_html(summary, doc, chunkings, created=CREATED)
    assert '<td class="num">0.93 ± 0.03 (120 of 1,747 pairs)</td>' in page
    assert '<td class="num">0.94 ± 0.03 (120 of 1,747 pairs)</td>' in page
    assert '<td class="num best">★ 1.20 ± 0.10 (400 of 3,000 pairs)</td>' in page
    assert '<td class="num">1.600</td>' in page  # exact: as today
    assert "A and B cannot be told apart yet (BC 0.93 ± 0.03 vs 0.94 ± 0.03)." in page
    assert "B&#x27;s chunks lean on each other less (CS 1.20 ± 0.10 vs 1.600 for A; lower is better)." in page
    best = [a for t, a in parse(page).tags if t == "td" and "best" in (a.get("class") or "")]
    assert len(best) == 1  # CS only: the BC intervals overlap
    assert "its 95% interval" in page
    (data,) = [json.loads(text) for attrs, text in parse(page).scripts if attrs.get("id") == "summary-data"]
    assert data["rows"][0]["estimates"]["bc"] == {"estimate": 0.93, "ci_low": 0.90, "ci_high": 0.96,
                                                  "pairs_scored": 120, "pairs_total": 1747, "method": "t"}
    assert data["best"]["bc"] is None and data["best"]["cs"] == "B"


def test_an_edited_copy_shows_its_base_and_edit_list(doc, chunkings):
    base = run_chunker(doc, ChunkerConfig.make("recursive", {"chunk_size": 40}))
    cut = base.chunks[2].start
    markup = doc.text.index("Raw markup")
    edited = ChunkerConfig.make(
        "manual", {"base": "recursive chunk_size=40", "edits": f"-{cut},+{markup}", "snap": "sentence", "doc": doc.id}
    )
    rows = (ConfigSummary("A", base.config, _values()), ConfigSummary("C", edited, _values()))
    summary = Summary(doc.source, doc.id, rows, {})
    page_html = report_html(summary, doc, {"A": base, "C": run_chunker(doc, edited)}, created=CREATED)
    page = parse(page_html)
    card = page_html[page_html.index('id="config-C"'):]
    assert "Edited copy of <code>recursive chunk_size=40</code>" in card
    assert "cut removed" in card and "cut added" in card
    assert f"<td>{markup:,}</td>" in card and f"<td>{cut:,}</td>" in card
    assert "<th>edits</th>" not in card  # the list is the table, not a raw parameter string
    assert "manual(recursive chunk_size=40; 1 cut added, 1 removed)" in card
    assert "Raw markup must stay text: &lt;" in card and PAYLOAD not in page_html  # the text around a cut is escaped
    assert "config-C" in page.ids("div")


def test_retrieval_cells_carry_their_interval_and_a_star_only_for_a_called_difference(doc, configs, chunkings,
                                                                                       questions):
    """B's recall is ahead on each of the four questions (★, called); their IoUs straddle each other (no ★)."""
    scores = {"A": ([0.5, 0.6, 0.4, 0.55], [0.1, 0.3, 0.2, 0.25]), "B": ([0.8, 0.85, 0.75, 0.9], [0.3, 0.1, 0.25, 0.2])}
    results = []
    for tag, _ in configs:
        recall, iou = scores[tag]
        qs = tuple(QuestionResult(i, "doc", q.question, recall[i], 0.2, 0.3, iou[i], ())
                   for i, q in enumerate(questions.questions))
        results.append(ConfigResult(chunkings[tag].config, MetricSummary.of(qs), {}, qs, 10, 40.0, 0.1, False))
    bm = Benchmark(tuple(results), "all-MiniLM-L6-v2", "f" * 64, 5, len(questions), ("doc",), 1.0)
    summary = summarize(doc, [(t, chunkings[t]) for t, _ in configs], benchmark=bm, questions=questions)
    page = report_html(summary, doc, chunkings, benchmark=bm, questions=questions, created=CREATED)
    recall_b, iou_a = summary.row("B").cell("recall"), summary.row("A").cell("iou")
    assert recall_b.startswith("82.5% [") and iou_a.startswith("21.3% [")
    assert f'<td class="num best">★ {recall_b}</td>' in page and f'<td class="num">{iou_a}</td>' in page
    assert f'<td class="num">{summary.row("B").cell("iou")}</td>' in page  # the IoUs: no ★
    lines = verdict(summary)
    assert any(line.startswith("B has the highest recall (82.5% [") for line in lines)
    assert any(line.startswith("B and A cannot be told apart on IoU over these 4 questions (difference ")
               or line.startswith("A and B cannot be told apart on IoU over these 4 questions (difference ")
               for line in lines)
    for line in lines:
        assert html.escape(line) in page
    assert "each mean with its 95% interval over these questions in brackets" in page
    assert PAYLOAD not in page  # the questions' text, as everywhere, escaped
    (data,) = [json.loads(text) for attrs, text in parse(page).scripts if attrs.get("id") == "summary-data"]
    assert data["rows"][1]["intervals"]["recall"] == summary.row("B").interval("recall").to_json()
    assert data["paired"]["recall"]["leaders"] == ["B"] and data["best"]["recall"] == "B" and data["best"]["iou"] is None
