"""``python -m backend reproduce chroma``'s work: the Chroma report's all-MiniLM-L6-v2 table, rerun beside the paper.

The Chroma technical report *Evaluating Chunking Strategies for Retrieval* (Smith and Troynikov,
July 2024) repeats its evaluation with the embedding model all-MiniLM-L6-v2: eight configurations,
5 chunks retrieved per question, the mean (± the standard deviation) of recall, precision,
precision-Ω and IoU over its 472 questions on 5 corpora (:data:`PAPER_ROWS`, with the seed's line
of each row). That table equals the appendix's "All corpora, all-MiniLM-L6-v2" block at 5
retrieved (the appendix's captions follow their tables; its "Wikitext, all-MiniLM-L6-v2" block
has other numbers).

:func:`reproduce_chroma` runs those configurations on any question set in the Chroma format
(``DIR/questions_df.csv`` and ``DIR/corpora/<corpus_id>.md|.txt``, the layout of the report's
``general_evaluation_data``) with :func:`~backend.retrieval.evaluate.evaluate` (5 retrieved,
chunks scored where the reference places them) and puts each row beside the paper's: ours,
paper and the difference, in percent. Each finished row is saved as its own JSON file in the
output folder, named by a key of the row, the question set's digest (its questions, excerpts and
corpora texts) and the embedder's weight fingerprint: a rerun on the same set with the same
embedder reads the rows done before instead of computing them again, while another set or
embedder gets rows of its own. An interrupted run (Ctrl-C) keeps the rows it finished. The key holds the
configuration's spec, not the code's version: after a change to a chunker, a new output folder recomputes.
:func:`reproduction_text` is the table the CLI prints.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from backend.chunkers import make_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig
from backend.config import data_dir
from backend.corpus.spec import question_set_digest
from backend.errors import InputError, ParameterError
from backend.models.embeddings import TextEmbedder, load_text_embedder
from backend.models.identity import embedder_fingerprint_without_loading
from backend.models.jsonstore import read_json_dict, write_json_atomic
from backend.progress import Progress
from backend.retrieval.evaluate import METRICS, ConfigResult, evaluate
from backend.retrieval.questions import QuestionSet, load_question_set
from backend.retrieval.store import ChunkStore, store_for_command

__all__ = [
    "PAPER",
    "PAPER_ROWS",
    "ROW_IDS",
    "RETRIEVE",
    "CHUNK_SPANS",
    "QUESTION_FILES",
    "PaperRow",
    "ChromaRequest",
    "QuestionSetInfo",
    "RowResult",
    "Reproduction",
    "select_rows",
    "default_out",
    "reproduce_chroma",
    "reproduction_text",
]

RETRIEVE = 5  # chunks retrieved per question in the paper's MiniLM table
CHUNK_SPANS = "reference"  # chunks scored where the reference's chunk search places them
QUESTION_FILES = ("questions_df.csv", "questions.csv")  # the report's name, then Chunk Lab's own export's
_FORMAT = 1  # the row files' format: a change makes rows of the old one be computed again

SEED = "chroma-evaluating-chunking-strategies.txt"  # the report as text, in the project's seeds


@dataclass(frozen=True)
class PaperInfo:
    """Where the paper's numbers come from, and what they were measured on."""

    title: str
    url: str
    table: str
    same_as: str
    source: str
    corpora: tuple[str, ...]
    corpus_tokens: int
    questions: int
    setup: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**self.__dict__, "corpora": list(self.corpora)}


PAPER = PaperInfo(
    title="Evaluating Chunking Strategies for Retrieval (Chroma technical report, Smith and Troynikov, July 2024)",
    url="https://research.trychroma.com/evaluating-chunking",
    table="the all-MiniLM-L6-v2 table (5 chunks retrieved per question)",
    same_as="the appendix's 'All corpora, all-MiniLM-L6-v2' block, retrieve 5",
    source=f"the seed {SEED}, lines 313-324 (the same numbers: its appendix, lines 657-664)",
    corpora=("State of the Union", "Wikitext", "Chatlogs", "Finance", "Pubmed"),
    corpus_tokens=328_208,
    questions=472,
    setup="questions generated with GPT-4-Turbo and filtered with text-embedding-3-large; "
          "retrieval with all-MiniLM-L6-v2, 5 chunks per question; cl100k token sizes",
)


@dataclass(frozen=True)
class PaperRow:
    """One row of the paper's table: the configuration and its numbers (percent, mean and standard deviation).

    Attributes:
        id: The short id ``--rows`` takes (``recursive-250-125``).
        label: The paper's name for it (``Recursive 250/125``).
        name: The Chunk Lab chunker.
        params: Its parameters.
        size: The paper's size column (``250 (~180)``: the mean chunk size in tokens in brackets).
        mean: Recall, precision, precision-Ω and IoU (the order of :data:`METRICS`), means in percent.
        std: Their standard deviations over the questions, in percent.
        line: The row's line in the seed (:data:`PAPER`'s ``source``).
    """

    id: str
    label: str
    name: str
    params: tuple[tuple[str, Any], ...]
    size: str
    mean: tuple[float, float, float, float]
    std: tuple[float, float, float, float]
    line: int

    @property
    def config(self) -> ChunkerConfig:
        """The configuration (not checked against the registry: :func:`select_rows` does that)."""
        return ChunkerConfig.make(self.name, dict(self.params))

    @property
    def paper_chunk_tokens(self) -> float | None:
        """The paper's mean chunk size in tokens where it gives one (``~180``), else None."""
        if "~" not in self.size:
            return None
        return float(self.size.split("~", 1)[1].rstrip(")"))

    def to_json(self) -> dict[str, Any]:
        """The paper's side of the row."""
        return {
            "id": self.id, "label": self.label, "config": self.config.spec, "size": self.size, "line": self.line,
            **{m: {"mean": self.mean[i], "std": self.std[i]} for i, m in enumerate(METRICS)},
        }


def _row(id_: str, label: str, name: str, params: dict[str, Any], size: str, cells: str, line: int) -> PaperRow:
    pairs = [c.split("±") for c in cells.split("|")]
    mean = tuple(float(a) for a, _ in pairs)
    std = tuple(float(b) for _, b in pairs)
    return PaperRow(id_, label, name, tuple(sorted(params.items())), size, mean, std, line)  # type: ignore[arg-type]


_CLUSTER = {"cap": "pieces"}  # the reference's cap: max_chunk_size // piece_size pieces, not tokens
# The paper's table as it is printed (recall | precision | precision-Ω | IoU, "mean ± std" in percent).
PAPER_ROWS: tuple[PaperRow, ...] = (
    _row("recursive-250-125", "Recursive 250/125", "recursive", {"chunk_size": 250, "chunk_overlap": 125},
         "250 (~180)", "78.7 ± 39.2 | 4.9 ± 4.5 | 21.9 ± 14.9 | 4.9 ± 4.4", 315),
    _row("tokentext-250-125", "TokenText 250/125", "fixed_token", {"chunk_size": 250, "chunk_overlap": 125},
         "250", "82.4 ± 36.2 | 3.6 ± 3.1 | 11.4 ± 6.6 | 3.5 ± 3.1", 316),
    _row("recursive-250-0", "Recursive 250/0", "recursive", {"chunk_size": 250, "chunk_overlap": 0},
         "250 (~162)", "78.5 ± 39.5 | 5.4 ± 4.9 | 26.7 ± 18.3 | 5.4 ± 4.9", 317),
    _row("tokentext-250-0", "TokenText 250/0", "fixed_token", {"chunk_size": 250, "chunk_overlap": 0},
         "250", "77.1 ± 39.3 | 3.3 ± 3.0 | 16.4 ± 10.3 | 3.3 ± 3.0", 318),
    _row("recursive-200-0", "Recursive 200/0", "recursive", {"chunk_size": 200, "chunk_overlap": 0},
         "200 (~128)", "75.7 ± 40.7 | 6.5 ± 6.2 | 31.2 ± 18.4 | 6.5 ± 6.1", 319),
    _row("tokentext-200-0", "TokenText 200/0", "fixed_token", {"chunk_size": 200, "chunk_overlap": 0},
         "200", "76.6 ± 38.8 | 4.1 ± 3.7 | 19.1 ± 11.0 | 4.1 ± 3.6", 320),
    _row("cluster-250", "Cluster 250", "cluster", {"max_chunk_size": 250, **_CLUSTER},
         "250 (~168)", "77.3 ± 38.6 | 6.1 ± 5.1 | 28.6 ± 16.7 | 6.0 ± 5.1", 321),
    _row("cluster-200", "Cluster 200", "cluster", {"max_chunk_size": 200, **_CLUSTER},
         "200 (~102)", "75.2 ± 39.9 | 7.2 ± 6.1 | 33.6 ± 20.0 | 7.2 ± 6.0", 322),
)
ROW_IDS = tuple(r.id for r in PAPER_ROWS)


@dataclass(frozen=True)
class ChromaRequest:
    """What ``reproduce chroma`` is asked to do.

    Attributes:
        data: The folder in the Chroma format: ``questions_df.csv`` (or ``questions.csv``) and ``corpora/``.
        out: Where the finished rows are kept (None: :func:`default_out`).
        rows: The row ids to run (:data:`ROW_IDS`; None or empty: all of them, in the paper's order).
        embedder: The embedder spec (None or ``default``: ``CHUNKLAB_EMBEDDER`` or the bundled all-MiniLM-L6-v2).
    """

    data: str
    out: str | None = None
    rows: tuple[str, ...] | None = None
    embedder: str | None = None


@dataclass(frozen=True)
class QuestionSetInfo:
    """What the question set is: its file, size, corpora and digest."""

    path: str
    corpora_dir: str
    questions: int
    corpora: tuple[str, ...]
    corpus_chars: int
    digest: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**self.__dict__, "corpora": list(self.corpora)}


@dataclass(frozen=True)
class RowResult:
    """One row: the paper's numbers and ours.

    Attributes:
        paper: The paper's row.
        summary: Our means and standard deviations, ``{"recall_mean", "recall_std", …}`` (fractions in 0..1, as
            :class:`~backend.retrieval.evaluate.MetricSummary` has them).
        per_corpus: The same per corpus id.
        chunks: Chunks over all corpora.
        chunk_tokens_mean: Our mean chunk size in tokens (the paper's size in brackets).
        seconds: The seconds the row took when it was computed.
        reused: True when it was read from the output folder (computed by an earlier run).
        file: Its file in the output folder.
    """

    paper: PaperRow
    summary: dict[str, float]
    per_corpus: dict[str, dict[str, float]]
    chunks: int
    chunk_tokens_mean: float
    seconds: float
    reused: bool
    file: str

    def ours(self, metric: str) -> float:
        """Our mean of ``metric``, in percent."""
        return 100.0 * self.summary[f"{metric}_mean"]

    def ours_std(self, metric: str) -> float:
        """Our standard deviation of ``metric`` over the questions, in percent."""
        return 100.0 * self.summary[f"{metric}_std"]

    def diff(self, metric: str) -> float:
        """Ours − paper, in percentage points."""
        return self.ours(metric) - self.paper.mean[METRICS.index(metric)]

    def to_json(self) -> dict[str, Any]:
        """``{"id", "label", "config", "reused", …, "metrics": {metric: {"ours", "ours_std", "paper", "paper_std",
        "diff"}}}``: percent, ``diff`` = ours − paper in percentage points."""
        metrics = {}
        for i, m in enumerate(METRICS):
            metrics[m] = {
                "ours": self.ours(m), "ours_std": self.ours_std(m),
                "paper": self.paper.mean[i], "paper_std": self.paper.std[i], "diff": self.diff(m),
            }
        return {
            "id": self.paper.id, "label": self.paper.label, "config": self.paper.config.spec,
            "paper_size": self.paper.size, "paper_line": self.paper.line,
            "reused": self.reused, "seconds": round(self.seconds, 3), "file": self.file,
            "chunks": self.chunks, "chunk_tokens_mean": round(self.chunk_tokens_mean, 2),
            "paper_chunk_tokens_mean": self.paper.paper_chunk_tokens,
            "metrics": metrics,
            "per_corpus": {cid: {k: 100.0 * v for k, v in s.items() if k != "questions"}
                           for cid, s in self.per_corpus.items()},
        }


@dataclass(frozen=True)
class Reproduction:
    """The outcome of :func:`reproduce_chroma`: the rows asked for, in the paper's order."""

    rows: tuple[RowResult, ...]
    question_set: QuestionSetInfo
    embedder: str
    embedder_fingerprint: str
    out: str
    seconds: float
    warnings: tuple[str, ...] = field(default=())

    @property
    def reused(self) -> int:
        """Rows read from the output folder."""
        return sum(r.reused for r in self.rows)

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document: the paper, the set, the embedder, and the rows (ours/paper/diff per metric)."""
        return {
            "paper": PAPER.to_json(),
            "question_set": self.question_set.to_json(),
            "embedder": {"name": self.embedder, "fingerprint": self.embedder_fingerprint},
            "retrieve": RETRIEVE,
            "chunk_spans": CHUNK_SPANS,
            "units": "percent: means and population standard deviations over the questions; "
                     "diff = ours - paper, in percentage points",
            "out": self.out,
            "reused": self.reused,
            "computed": len(self.rows) - self.reused,
            "seconds": round(self.seconds, 3),
            "rows": [r.to_json() for r in self.rows],
            "warnings": list(self.warnings),
        }


def select_rows(ids: Sequence[str] | None) -> tuple[PaperRow, ...]:
    """The rows named by ``ids`` (any order, repeats dropped), in the paper's order; all for None or empty.

    Raises:
        ParameterError: an unknown id (the message lists the ids).
    """
    wanted = [i.strip().lower() for i in ids or () if i.strip()]
    bad = [i for i in wanted if i not in ROW_IDS]
    if bad:
        raise ParameterError(f"unknown row {bad[0]!r}; the rows: {', '.join(ROW_IDS)}")
    return tuple(r for r in PAPER_ROWS if not wanted or r.id in wanted)


def default_out() -> Path:
    """Where the rows are kept by default: ``$CHUNKLAB_DATA_DIR/reproduce/chroma`` (rows of every set, keyed apart)."""
    return data_dir() / "reproduce" / "chroma"


def _question_csv(folder: Path) -> Path:
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder (give a folder in the Chroma format: questions_df.csv "
                         "and corpora/<corpus_id>.md|.txt)")
    for name in QUESTION_FILES:
        if (folder / name).is_file():
            return folder / name
    raise InputError(f"{folder}: no questions_df.csv in it (the Chroma format: questions_df.csv with the columns "
                     "question, references, corpus_id, and corpora/<corpus_id>.md|.txt)")


def _load_set(data: str) -> tuple[QuestionSet, QuestionSetInfo]:
    folder = Path(data).expanduser()
    csv_path = _question_csv(folder)
    qset = load_question_set(csv_path, folder / "corpora")
    if len(qset) == 0:
        raise InputError(f"{csv_path}: no questions in it")
    info = QuestionSetInfo(
        path=str(csv_path), corpora_dir=str(folder / "corpora"), questions=len(qset),
        corpora=tuple(qset.corpus_ids), corpus_chars=sum(len(qset.corpora[c]) for c in qset.corpus_ids),
        digest=question_set_digest(qset) or "",
    )
    return qset, info


def _embedder_spec(raw: str | None) -> str | None:
    return None if raw is None or raw.strip().lower() in ("", "default") else raw.strip()


def _row_key(row: PaperRow, config: ChunkerConfig, digest: str, fingerprint: str) -> str:
    body = {"format": _FORMAT, "row": row.id, "config": config.spec, "retrieve": RETRIEVE,
            "chunk_spans": CHUNK_SPANS, "questions": digest, "embedder": fingerprint}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()


def _row_file(out: Path, row: PaperRow, key: str) -> Path:
    return out / f"{row.id}-{key[:16]}.json"


def _stored(path: Path, key: str, row: PaperRow) -> RowResult | None:
    """The row saved in ``path`` when it is there, whole and of this key; None otherwise (it is computed again)."""
    data = read_json_dict(path)
    if data.get("key") != key:
        return None
    try:
        summary = {f"{m}_{s}": float(data["summary"][f"{m}_{s}"]) for m in METRICS for s in ("mean", "std")}
        per_corpus = {str(c): {k: float(v) for k, v in s.items()} for c, s in data.get("per_corpus", {}).items()}
        if not all(math.isfinite(v) for v in summary.values()):
            return None
        return RowResult(row, summary, per_corpus, int(data["chunks"]), float(data["chunk_tokens_mean"]),
                         float(data["seconds"]), True, str(path))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _row_record(key: str, row: PaperRow, result: ConfigResult, info: QuestionSetInfo, embedder: str,
                fingerprint: str) -> dict[str, Any]:
    """What a finished row's file holds: its key and identity (set, embedder, configuration) and our numbers."""
    summary = result.summary.to_json()
    return {
        "key": key, "format": _FORMAT, "row": row.id, "config": result.config.spec,
        "question_set": info.to_json(), "embedder": {"name": embedder, "fingerprint": fingerprint},
        "retrieve": RETRIEVE, "chunk_spans": CHUNK_SPANS,
        "summary": {k: v for k, v in summary.items() if k != "questions"},
        "per_corpus": {cid: s.to_json() for cid, s in result.per_corpus.items()},
        "chunks": result.chunks, "chunk_tokens_mean": result.chunk_tokens_mean, "seconds": result.seconds,
        "texts_embedded": result.texts_embedded,
    }


def reproduce_chroma(
    request: ChromaRequest,
    *,
    progress: Progress | None = None,
    embedder: TextEmbedder | None = None,
    store: ChunkStore | None = None,
) -> Reproduction:
    """Run the paper's MiniLM rows on the request's question set; rows done before are read back, not computed.

    Args:
        request: The folder, the output folder, the rows and the embedder.
        progress: The run's progress (one part per row computed); may raise ``Cancelled``.
        embedder: A loaded embedder to use instead of loading ``request.embedder`` (tests share one).
        store: The Chroma store (None: the command's store, :func:`~backend.retrieval.store.store_for_command`).

    Raises:
        ParameterError: an unknown row id; a configuration this build's chunkers do not accept.
        InputError: no such folder, no question CSV, a missing corpora folder or corpus, a bad question set.
        ModelError, StoreError: the embedder or the store fails.
    """
    t0 = time.perf_counter()
    progress = progress or Progress()
    rows = select_rows(request.rows)
    configs = [make_chunker(r.name, dict(r.params), "cl100k").config for r in rows]  # a bad one fails before reading
    qset, info = _load_set(request.data)
    spec = _embedder_spec(request.embedder)
    if embedder is not None:
        fingerprint, name = embedder.info.fingerprint, embedder.info.name
    else:
        fingerprint = embedder_fingerprint_without_loading(spec)
        name = None
        if fingerprint is None:  # a hub id or a server: known once loaded
            embedder = load_text_embedder(spec)
            fingerprint, name = embedder.info.fingerprint, embedder.info.name
    out = Path(request.out).expanduser() if request.out else default_out()
    warnings: list[str] = []
    done: dict[str, RowResult] = {}
    todo: list[tuple[PaperRow, ChunkerConfig, str]] = []
    for row, config in zip(rows, configs):
        key = _row_key(row, config, info.digest, fingerprint)
        stored = _stored(_row_file(out, row, key), key, row)
        if stored is not None:
            done[row.id] = stored
        else:
            todo.append((row, config, key))
    if todo:
        if embedder is None:
            progress.check()
            embedder = load_text_embedder(spec)
        name = embedder.info.name
        if store is None:
            with store_for_command() as opened:
                _compute(todo, qset, info, embedder, opened, out, progress, done, warnings)
        else:
            _compute(todo, qset, info, embedder, store, out, progress, done, warnings)
    if name is None:  # every row read back: the embedder's name is the one they were computed with
        name = read_json_dict(Path(next(iter(done.values())).file)).get("embedder", {}).get("name", spec or "default")
    return Reproduction(
        rows=tuple(done[r.id] for r in rows), question_set=info, embedder=str(name), embedder_fingerprint=fingerprint,
        out=str(out), seconds=time.perf_counter() - t0, warnings=tuple(warnings),
    )


def _compute(
    todo: Sequence[tuple[PaperRow, ChunkerConfig, str]], qset: QuestionSet, info: QuestionSetInfo,
    embedder: TextEmbedder, store: ChunkStore, out: Path, progress: Progress, done: dict[str, RowResult],
    warnings: list[str],
) -> None:
    """Evaluate the rows not done yet, one at a time, saving each as soon as it is finished."""
    context = ModelContext(embedder=embedder)
    for i, (row, config, key) in enumerate(todo):
        benchmark = evaluate(
            qset, [config], embedder=embedder, retrieve=RETRIEVE, store=store, context=context,
            chunk_spans=CHUNK_SPANS, progress=progress.part(i, len(todo), "row"),
        )
        result = benchmark.results[0]
        path = _row_file(out, row, key)
        record = _row_record(key, row, result, info, embedder.info.name, embedder.info.fingerprint)
        if not write_json_atomic(path, record) and not warnings:
            warnings.append(f"{out}: cannot be written; the rows are not kept for the next run")
        summary = record["summary"]
        per_corpus = {cid: {k: float(v) for k, v in s.items()} for cid, s in record["per_corpus"].items()}
        done[row.id] = RowResult(row, summary, per_corpus, result.chunks, result.chunk_tokens_mean, result.seconds,
                                 False, str(path))


# --- the text the CLI prints -------------------------------------------------------------------------------------

_SHORT = {"recall": "recall", "precision": "precision", "precision_omega": "precision-Ω", "iou": "IoU"}


def _f(x: float) -> str:
    return f"{x:.1f}"


def reproduction_text(result: Reproduction) -> str:
    """The table ``reproduce chroma`` prints: per row and metric ours / paper / Δ, then the standard deviations."""
    q = result.question_set
    corpora = ", ".join(q.corpora[:6]) + (f", … ({len(q.corpora) - 6} more)" if len(q.corpora) > 6 else "")
    lines = [
        f"Chroma report, {PAPER.table.removeprefix('the ')}: ours beside the paper's",
        f"  ours:  {q.path}: {q.questions} questions on {len(q.corpora)} "
        f"{'corpus' if len(q.corpora) == 1 else 'corpora'} ({corpora}); embedder {result.embedder}; "
        f"{RETRIEVE} chunks retrieved per question; chunks scored at the reference's spans",
        f"  paper: its {len(PAPER.corpora)} corpora ({', '.join(PAPER.corpora)}; {PAPER.corpus_tokens:,} tokens), "
        f"{PAPER.questions} questions; {PAPER.setup}",
        "  numbers: means over the questions in percent; Δ = ours − paper in percentage points",
        "",
    ]
    w = 19
    head1 = f"{'row':<{w}}" + "".join(f" {_SHORT[m]:<20}" for m in METRICS) + "  tokens per chunk"
    head2 = f"{'':<{w}}" + "".join(f" {'ours':>6}{'paper':>7}{'Δ':>7}" for _ in METRICS) + f"  {'ours':>6}{'paper':>7}"
    lines += [head1, head2]
    for r in result.rows:
        cells = []
        for i, m in enumerate(METRICS):
            ours = round(r.ours(m), 1)
            paper = r.paper.mean[i]
            cells.append(f" {_f(ours):>6}{_f(paper):>7}{ours - paper:>+7.1f}")
        paper_tokens = r.paper.paper_chunk_tokens
        size = f"{paper_tokens:.0f}" if paper_tokens is not None else "—"
        lines.append(f"{r.paper.id:<{w}}" + "".join(cells) + f"  {r.chunk_tokens_mean:>6.0f}{size:>7}")
    lines += ["tokens per chunk: our mean chunk size (cl100k); the paper's mean where its size column gives one "
              "in brackets (— : it gives the fixed size only)",
              "", "± population standard deviation over the questions, ours / paper (percent):",
              (f"{'row':<{w}}" + "".join(f" {_SHORT[m]:<15}" for m in METRICS)).rstrip()]
    for r in result.rows:
        lines.append((f"{r.paper.id:<{w}}" + "".join(
            f" {_f(r.ours_std(m)) + ' / ' + _f(r.paper.std[i]):<15}" for i, m in enumerate(METRICS))).rstrip())
    lines += ["", "configurations:"]
    lines += [f"  {r.paper.id:<{w}} {r.paper.config.spec} · {r.chunks} chunks (the paper: {r.paper.label}, "
              f"size {r.paper.size}; its line {r.paper.line})" for r in result.rows]
    computed = len(result.rows) - result.reused
    lines.append("")
    if result.reused:
        lines.append(f"reused {result.reused} of {len(result.rows)} rows from {result.out} (done before on this set "
                     f"with this embedder); computed {computed}")
    else:
        lines.append(f"computed {computed} rows; kept in {result.out}")
    lines.append(f"the paper's numbers: {PAPER.source}")
    lines += [f"warning: {w_}" for w_ in result.warnings]
    return "\n".join(lines) + "\n"

