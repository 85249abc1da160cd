"""The Meta-Chunking chunkers on the real bundled SmolLM2, in-process and through the CLI.

The acceptance check: from the per-sentence values ``python -m backend ppl`` prints, an
independent implementation of each rule (written here from the issue's text) gives exactly
the chunks ``python -m backend chunk --chunker ppl`` gives, for several thresholds.

The PPL page's entries (``chunk_from_means``, ``chunk_from_steps``) are pinned on a small
document and checked against the CLI's ``chunk`` output on a bundled sample, with the
model-free scorer of ``tests/support/fake_scores.py``.
"""

from __future__ import annotations

import json
import math
import subprocess

import pytest

from backend.chunkers import ModelContext, make_chunker
from backend.chunkers.meta.algorithms import MarginStep, boundary_candidates, find_minima, sentence_values
from backend.chunkers.meta.results import MarginResult, PPLScores, values_csv
from backend.errors import Cancelled, ParameterError
from backend.progress import CancelToken, Progress
from backend.samples import load_sample
from backend.text.document import Document
from backend.tokenizers import SpanCounter, get_tokenizer
from tests.backend.cli.test_cli_models import run_cli
from tests.support.cli import run_main
from tests.support.patching import patch_everywhere
from tests.invariants import check_invariants as _check
from tests.support.fake_scores import FakeScorer, fake_token_scores

TEXT = (
    "The lighthouse at Corran Point was built in 1851. Its lamp burned whale oil for the first twenty years. "
    "Keepers climbed one hundred and twelve steps to trim the wick. In 1873 the oil gave way to paraffin.\n\n"
    "Bread is made from flour, water, salt and yeast. The dough must rest before it is shaped. "
    "A hot oven gives the crust its colour. Some bakers add a pan of water for steam.\n\n"
    "The committee met on Tuesday. It approved the budget for the new library. "
    "Two members voted against it. The building work starts in May and should last a year. "
    "Was the vote fair? Most people thought so.\n\n"
    "Rain fell all night. By morning the river had risen over the path, and the ducks swam where people "
    "usually walked their dogs. Nobody minded."
)


def independent(records, theta, rule="reference", value="nll"):
    """Chunks (start, end) from the CLI's per-sentence records, written from the issue's rules."""
    def val(r):
        x = r["nll_mean"]
        if x is None:
            return float("nan")
        return math.exp(x) if value == "ppl" else x

    v = [val(r) for r in records]
    minima = []
    for i in range(1, len(v) - 1):
        a, b, c = v[i - 1], v[i], v[i + 1]
        if rule == "reference":
            if b < a and b < c and (a - b >= theta or c - b >= theta):
                minima.append(i)
            elif b < a and b == c and a - b >= theta:
                minima.append(i)
        elif not any(math.isnan(x) for x in (a, b, c)):
            if min(a, c) - b > theta or (a - b > theta and c == b):
                minima.append(i)
    cuts = [-1] + minima + [len(v) - 1]
    return [(records[cuts[k] + 1]["start"], records[cuts[k + 1]]["end"]) for k in range(len(cuts) - 1)]


def check_invariants(doc, chunking, overlap=False):
    """Exact spans, order, exact token counts, every non-space character covered."""
    _check(doc, chunking, None, overlap, get_tokenizer(chunking.config.tokenizer))


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(d))
    return d


@pytest.fixture()
def doc_file(tmp_path):
    p = tmp_path / "mixed.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


@pytest.fixture()
def cli(cache_dir, monkeypatch):
    """``python -m backend ARGS`` run in this process: its exit code, stdout and stderr.

    The checks here are on what the CLI prints, not on the process, so the commands share one load of
    the LM (and the Python start-up) with each other and with the in-process tests; the environment is
    ``run_cli``'s. The one-line error for a model that cannot be loaded still runs as a process.
    """
    monkeypatch.setenv("CHUNKLAB_DEVICE", "cpu")

    def run(*args: str) -> subprocess.CompletedProcess:
        return run_main(*args)

    return run


def spans(proc):
    assert proc.returncode == 0, proc.stderr.decode()
    return [(r["start"], r["end"]) for r in map(json.loads, proc.stdout.decode().splitlines())]


def test_cli_chunks_equal_an_independent_implementation_of_each_rule(doc_file, cli):
    proc = cli("ppl", str(doc_file))
    assert proc.returncode == 0, proc.stderr.decode()
    records = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert len(records) >= 15
    cases = [
        (0.0, "reference", "nll"),
        (0.3, "reference", "nll"),
        (1.0, "reference", "nll"),
        (0.0, "paper", "nll"),
        (0.4, "paper", "nll"),
        (5.0, "reference", "ppl"),
        (20.0, "paper", "ppl"),
    ]
    distinct = set()
    for theta, rule, value in cases:
        got = spans(cli(
            "chunk", str(doc_file), "--chunker", "ppl",
            "--param", f"threshold={theta}", "--param", f"rule={rule}", "--param", f"value={value}",
        ))
        assert got == independent(records, theta, rule, value), (theta, rule, value)
        distinct.add(len(got))
    assert len(distinct) >= 3  # the thresholds really change the chunking


def test_combined_never_exceeds_the_target_except_single_meta_chunks(doc_file, cli):
    doc = Document.from_text(TEXT)
    ctx = ModelContext()
    meta = make_chunker("ppl", {"threshold": 0.0}).chunk(doc, ctx)
    check_invariants(doc, meta)
    meta_spans = {(c.start, c.end) for c in meta}
    tok = get_tokenizer("cl100k")
    for target in (10, 30, 60, 150):
        combined = make_chunker("ppl_combined", {"threshold": 0.0, "target_length": target}).chunk(doc, ctx)
        check_invariants(doc, combined)
        assert len(combined) <= len(meta)
        for c in combined:
            assert c.tokens == tok.count(c.text)
            assert c.tokens <= target or (c.start, c.end) in meta_spans
    # The CLI flag form of the issue works too.
    got = spans(cli("chunk", str(doc_file), "--chunker", "ppl_combined", "--param", "target_length=60"))
    assert got == [(c.start, c.end) for c in make_chunker("ppl_combined", {"target_length": 60}).chunk(doc, ctx)]


def test_overlap_repeats_the_minimum_sentence(cache_dir):
    doc = Document.from_text(TEXT)
    ctx = ModelContext()
    plain = make_chunker("ppl", {"threshold": 0.0}).chunk(doc, ctx)
    over = make_chunker("ppl_overlap", {"threshold": 0.0}).chunk(doc, ctx)
    check_invariants(doc, over, overlap=True)
    assert len(over) == len(plain) >= 2
    sentences = list(doc.sentences)
    for a, b in zip(over.chunks, over.chunks[1:]):
        shared = next(s for s in sentences if s.start == b.start)
        assert a.end == shared.end  # the boundary sentence ends one chunk and starts the next


def test_margin_sampling_runs_and_reruns_from_the_cache_without_the_model(cache_dir):
    doc = Document.from_text(
        "The train left at noon. It reached the coast by evening. "
        "Photosynthesis turns light into chemical energy. Plants store it as sugar. The end."
    )
    for unit in ("sentence", "chunk"):
        first = make_chunker("margin_sampling", {"unit": unit}).chunk(doc, ModelContext())
        check_invariants(doc, first)
        assert first.chunks[0].start == doc.sentences[0].start
        assert first.chunks[-1].end == doc.sentences[-1].end

        def no_loading():
            raise AssertionError("the model was loaded although every margin is cached")

        again = make_chunker("margin_sampling", {"unit": unit}).chunk(doc, ModelContext(on_load=no_loading))
        assert [(c.start, c.end) for c in again] == [(c.start, c.end) for c in first]
    combined = make_chunker("margin_sampling", {"unit": "sentence", "target_length": 12}).chunk(doc, ModelContext())
    check_invariants(doc, combined)


def test_chinese_document_and_a_small_sliding_window(cache_dir):
    zh = Document.from_text(
        "今天早上下了一场大雨。街道上到处都是积水。孩子们穿着雨靴去上学。"
        "公司发布了新的财务报告。收入比去年增长了百分之十。董事会对结果很满意。"
        "晚上雨停了。月亮从云后面出来了。"
    )
    assert zh.language == "zh" and len(zh.sentences) == 8
    chunking = make_chunker("ppl", {"threshold": 0.0}, tokenizer="chars").chunk(zh, ModelContext())
    check_invariants(zh, chunking)
    assert chunking.chunks[-1].end == zh.sentences[-1].end
    doc = Document.from_text(TEXT)
    small = make_chunker("ppl", {"threshold": 0.2}).chunk(doc, ModelContext(window=48))
    check_invariants(doc, small)


def test_progress_is_reported_and_cancel_stops_scoring(cache_dir):
    doc = Document.from_text(TEXT + " One more sentence makes this text new to the cache.")
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        make_chunker("ppl").chunk(doc, ModelContext(progress=Progress(cancel=token)))
    seen = []
    make_chunker("ppl").chunk(doc, ModelContext(progress=Progress(report=lambda f, eta, label: seen.append(f))))
    assert seen and seen[-1] == 1.0


def test_registry_marks_model_chunkers_and_bad_parameters_are_one_line(doc_file, cache_dir, cli):
    from backend.chunkers import chunker_specs

    needs = {s["name"]: s["needs"] for s in chunker_specs()}
    assert needs["ppl"] == needs["margin_sampling"] == ["lm"] and needs["recursive"] == []
    proc = cli("chunk", str(doc_file), "--chunker", "ppl", "--param", "rule=loose")
    assert proc.returncode == 2
    assert proc.stderr.decode().count("\n") == 1 and "rule must be one of" in proc.stderr.decode()
    proc = run_cli("chunk", str(doc_file), "--chunker", "ppl", "--lm", "/nonexistent/model", cache_dir=cache_dir)
    assert proc.returncode == 1 and proc.stderr.decode().count("\n") == 1


# --- the PPL page's entries: chunks from scores already held ---------------------------------------

SMALL = Document.from_text("The cat sat. It was warm. Dogs bark. Rain fell. We left. Night came. All slept.")
MEANS = [3.0, 1.0, 1.25, 0.75, 2.5, 2.0, 2.25]  # reference drops: sentence 1 → 2.0, 3 → 1.75, 5 → 0.5
STEPS = (
    MarginStep(1, 0.2, 0.0, True, 0),
    MarginStep(2, -0.1, 0.0, False, 1),
    MarginStep(3, 0.3, 0.0, True, 1),
    MarginStep(4, -0.2, 0.0, False, 3),
    MarginStep(5, 0.1, 0.04, True, 3),
    MarginStep(6, 0.0, 0.02, False, 5),
)


def _spans_of(chunking):
    return [(c.start, c.end, c.tokens) for c in chunking]


def test_chunk_from_means_pins_each_ppl_chunker():
    got = {
        label: _spans_of(make_chunker(name, params).chunk_from_means(SMALL, MEANS))
        for label, name, params in [
            ("ppl", "ppl", {"threshold": 0.6}),
            ("paper", "ppl", {"threshold": -0.6, "rule": "paper"}),
            ("overlap", "ppl_overlap", {"threshold": 0.6}),
            ("combined", "ppl_combined", {"threshold": 0.0, "target_length": 12}),
        ]
    }
    assert got == {
        "ppl": [(0, 25, 8), (26, 47, 7), (48, 79, 9)],
        "paper": [(0, 25, 8), (26, 36, 4), (37, 47, 3), (48, 68, 6), (69, 79, 3)],
        "overlap": [(0, 25, 8), (13, 47, 10), (37, 79, 12)],
        "combined": [(0, 25, 8), (26, 47, 7), (48, 79, 9)],
    }
    chunking = make_chunker("ppl", {"threshold": 0.6}).chunk_from_means(SMALL, MEANS)
    assert chunking.config == make_chunker("ppl", {"threshold": 0.6}).config
    assert (chunking.doc_id, chunking.doc_length) == (SMALL.id, len(SMALL.text))
    assert [c.text for c in chunking] == [SMALL.text[c.start : c.end] for c in chunking]


def test_chunk_from_steps_pins_margin_sampling():
    plain = make_chunker("margin_sampling").chunk_from_steps(SMALL, STEPS)
    assert _spans_of(plain) == [(0, 12, 4), (13, 36, 7), (37, 56, 6), (57, 79, 6)]
    merged = make_chunker("margin_sampling", {"target_length": 12}).chunk_from_steps(SMALL, STEPS)
    assert _spans_of(merged) == [(0, 36, 11), (37, 79, 12)]


def test_the_page_entries_refuse_what_does_not_fit_the_document():
    ppl = make_chunker("ppl")
    with pytest.raises(ParameterError, match="6 values for 7 sentences"):
        ppl.chunk_from_means(SMALL, MEANS[:-1])
    with pytest.raises(ParameterError, match="counts words tokens, not cl100k"):
        ppl.chunk_from_means(SMALL, MEANS, SpanCounter(get_tokenizer("words"), SMALL.text))
    with pytest.raises(ParameterError, match="another text"):
        ppl.chunk_from_means(SMALL, MEANS, SpanCounter(get_tokenizer("cl100k"), SMALL.text + " More."))
    with pytest.raises(ParameterError, match="beyond the document's 7 sentences"):
        make_chunker("margin_sampling").chunk_from_steps(SMALL, (*STEPS, MarginStep(7, 0.5, 0.0, True, 6)))


def test_scores_and_their_csv_are_pinned():
    scores = PPLScores.build(SMALL, fake_token_scores(SMALL.text, seed=3), "model-id", "Model")
    assert scores.tokens == [2, 3, 2, 2, 2, 2, 2]  # the document's first token is never scored
    assert scores.nll == [s.nll_mean for s in scores.sentences]
    values = sentence_values(MEANS)
    candidates = boundary_candidates(values)
    kept = find_minima(values, 0.6)
    chunking = make_chunker("ppl", {"threshold": 0.6}).chunk_from_means(SMALL, MEANS)
    rows = [r.split(",") for r in values_csv(scores, values, candidates, kept, chunking, "nll").splitlines()]
    assert [r[:4] + r[6:] for r in rows] == [
        ["index", "start", "end", "tokens", "nll", "drop", "boundary", "chunk", "text"],
        ["0", "0", "12", "2", "3.0", "", "0", "0", "The cat sat."],
        ["1", "13", "25", "3", "1.0", "2.0", "1", "0", "It was warm."],
        ["2", "26", "36", "2", "1.25", "", "0", "1", "Dogs bark."],
        ["3", "37", "47", "2", "0.75", "1.75", "1", "1", "Rain fell."],
        ["4", "48", "56", "2", "2.5", "", "0", "2", "We left."],
        ["5", "57", "68", "2", "2.0", "0.5", "0", "2", "Night came."],
        ["6", "69", "79", "2", "2.25", "", "0", "2", "All slept."],
    ]
    assert [float(r[4]) for r in rows[1:]] == scores.nll


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("ppl", {"threshold": 0.5}),
        ("ppl", {"threshold": 0.1, "rule": "paper", "value": "ppl"}),
        ("ppl_combined", {"threshold": 0.0, "target_length": 120}),
        ("ppl_overlap", {"threshold": 0.5}),
        ("margin_sampling", {"unit": "chunk", "language": "auto", "target_length": 0}),
        ("margin_sampling", {"unit": "sentence", "language": "auto", "target_length": 80}),
    ],
)
def test_the_ppl_page_shows_what_the_cli_chunk_command_prints(name, params, monkeypatch, capsys):
    """The page's path (scores held in session state, then the chunker's own entry) equals ``python -m backend chunk``."""
    from backend.cli.main import main

    patch_everywhere(monkeypatch, "backend.models.scorer.load_scorer", lambda *_a, **_k: FakeScorer())
    doc = load_sample("narrative")
    flags = [f for key, value in params.items() for f in ("--param", f"{key}={value}")]
    capsys.readouterr()
    assert main(["chunk", "sample:narrative", "--chunker", name, *flags, "--no-cache"]) == 0
    cli = capsys.readouterr().out

    # What pages/ppl.py does: the job's result kept in session state, re-chunked by the registry's chunker.
    job_context = ModelContext(scorer=FakeScorer(), use_cache=False)
    counter = SpanCounter(get_tokenizer("cl100k"), doc.text)
    if name == "margin_sampling":
        decider = make_chunker(name, {"unit": params["unit"], "language": "auto"})
        held = MarginResult(doc.id, "fake", params["unit"], tuple(decider.steps(doc, job_context)))
        page = make_chunker(name, params).chunk_from_steps(doc, held.steps, counter)
    else:
        held = PPLScores.build(doc, job_context.token_scores(doc.text), "fake", "fake")
        page = make_chunker(name, params).chunk_from_means(doc, held.nll, counter)
    assert len(page) > 3  # the sample really is cut
    assert page.to_jsonl() == cli
