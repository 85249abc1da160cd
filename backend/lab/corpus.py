"""The Corpus page's work: a corpus run planned as a background job, and the views of its output folder.

The page reads its widgets and calls :func:`plan_corpus` once on Run (every input is checked
there, each bad one a one-line :class:`~backend.errors.ChunkLabError`); the plan's body is
:func:`backend.corpus.engine.run_corpus`, so the page computes exactly what ``python -m backend
corpus`` computes. While the job runs and after, :func:`corpus_view` reads the output folder
(``results.jsonl`` grows one document at a time) and returns what the page draws: the aggregate
table, the verdict, the distributions, the documents where the configurations disagree most and
the skipped files. :func:`open_in_compare` gives what a click into Compare loads: the document as
the corpus run read it, and the run's configurations with their letters.

Where things live: an uploaded zip is kept under ``<data dir>/corpus/uploads`` by its content's
hash (uploading it again finds it), and a run's output folder defaults to
``<data dir>/corpus/runs/<corpus name>-<hash of its path>/<settings digest>``: the same corpus
with the same settings resumes there (a configuration added later runs on every document), and
other settings never collide with it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import re
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import plotly.graph_objects as go

from backend.chunkers import config_needs, make_chunker
from backend.chunking import ChunkerConfig
from backend.config import data_dir
from backend.corpus.aggregate import AGGREGATE_METRICS, aggregate_table, disagreements, metric_values
from backend.corpus.engine import ENGINES, EXTRACTED, CorpusRun, make_engine, run_corpus
from backend.corpus.inputs import CorpusFile
from backend.corpus.results import CorpusResults, read_results
from backend.corpus.spec import CorpusSpec, parse_corpus_metrics, tag_configs
from backend.corpus.work import load_corpus_document
from backend.errors import InputError, ParameterError
from backend.figures.corpus import distribution_figure
from backend.lab.jobs import JobPlan
from backend.metrics.report import QualitySettings
from backend.models.embedder import load_embedder
from backend.models.types import Scorer
from backend.progress import Progress
from backend.report.corpus import corpus_verdict
from backend.retrieval.questions import QuestionSet
from backend.text.document import Document

__all__ = [
    "PAIRS_MAX",
    "CorpusView",
    "available_engines",
    "corpus_home",
    "corpus_view",
    "default_out",
    "check_corpus_path",
    "check_results_folder",
    "open_in_compare",
    "parse_config_lines",
    "plan_corpus",
    "save_upload",
]

PAIRS_MAX = 1_000_000  # the pair budget's upper bound on the page (0 there means every pair)
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def corpus_home() -> Path:
    """``<data dir>/corpus``: uploaded corpora and the runs' default output folders."""
    return data_dir() / "corpus"


def available_engines() -> tuple[str, ...]:
    """The engines this installation can run: ``local``, and ``ray`` when the ``ray`` package is installed.

    Ray is not imported (that takes seconds): its package is looked up.
    """
    return tuple(e for e in ENGINES if e != "ray" or importlib.util.find_spec("ray") is not None)


def _safe_name(name: str) -> str:
    stem = _SAFE.sub("_", Path(name).stem).strip("._") or "corpus"
    return stem[:60]


def save_upload(data: bytes, name: str) -> Path:
    """Keep an uploaded zip under ``<data dir>/corpus/uploads`` (named by its content's hash) and return its path.

    Raises:
        InputError: the bytes are not a zip, or the file cannot be written.
    """
    if not data:
        raise InputError(f"{name}: the file is empty")
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise InputError(f"{name}: not a zip (upload a .zip of documents, or give a folder's path)")
    digest = hashlib.sha256(data).hexdigest()[:16]
    path = corpus_home() / "uploads" / f"{_safe_name(name)}-{digest}.zip"
    if path.exists() and path.stat().st_size == len(data):
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as e:
        raise InputError(f"{name}: cannot be saved ({e.strerror or e})") from None
    return path


def check_corpus_path(raw: str) -> Path:
    """The corpus a user typed: an existing folder or zip file (``~`` expanded).

    Raises:
        InputError: empty, missing, or neither a folder nor a zip (one line).
    """
    text = raw.strip()
    if not text:
        raise InputError("give the path of a folder or a .zip of documents on the server")
    path = Path(text).expanduser()
    if not path.exists():
        raise InputError(f"{text}: no such folder or zip on the server")
    if path.is_file() and not zipfile.is_zipfile(path):
        raise InputError(f"{text}: neither a folder nor a zip of documents")
    if not path.is_file() and not path.is_dir():
        raise InputError(f"{text}: neither a folder nor a zip of documents")
    return path


def check_results_folder(raw: str) -> Path:
    """An output folder a user typed to open (a run of the page or of ``python -m backend corpus --out``).

    Raises:
        InputError: empty, missing, or not a corpus run's output folder (one line).
    """
    text = raw.strip()
    if not text:
        raise InputError("give the path of a corpus run's output folder")
    path = Path(text).expanduser()
    if not path.is_dir():
        raise InputError(f"{text}: no such folder on the server")
    if not read_results(path).run:
        raise InputError(f"{text}: not the output folder of a corpus run (it has no run.json)")
    return path


def parse_config_lines(text: str) -> list[ChunkerConfig]:
    """Configurations typed one per line (``recursive chunk_size=200``; blank lines and ``#`` comments skipped).

    Raises:
        ParameterError: a line that does not parse, or names a bad chunker or parameter (``line 2: …``).
    """
    configs = []
    for n, line in enumerate(text.splitlines(), start=1):
        spec = line.strip()
        if not spec or spec.startswith("#"):
            continue
        try:
            name, params, tokenizer = ChunkerConfig.parse(spec)
            configs.append(make_chunker(name, params, tokenizer).config)
        except ValueError as e:
            raise ParameterError(f"line {n} ({spec!r}): {e}") from None
        except ParameterError as e:
            raise ParameterError(f"line {n} ({spec!r}): {e}") from None
    return configs


def default_out(source: Path, spec: CorpusSpec) -> Path:
    """The default output folder of ``spec`` on the corpus at ``source`` (see the module docstring)."""
    where = hashlib.sha256(str(source.resolve()).encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return corpus_home() / "runs" / f"{_safe_name(source.name)}-{where}" / spec.digest()


def plan_corpus(
    source: Path,
    configs: Sequence[ChunkerConfig],
    *,
    metrics: Sequence[str],
    pairs: int | None,
    questions: QuestionSet | None,
    questions_name: str | None,
    settings: QualitySettings = QualitySettings(),
    retrieve: int = 5,
    engine: str = "local",
    workers: int | None = None,
    lm: str | None = None,
    embedder: str | None = None,
    out: Path | None = None,
) -> JobPlan:
    """The corpus run as a background job (its body is :func:`~backend.corpus.engine.run_corpus`).

    Its ``meta`` holds what the page shows before and while it runs: ``out`` (the output folder),
    ``configs`` (the run's configuration specs, in order), ``resumed`` (rows of these
    configurations an earlier run left in ``out``: not recomputed), ``source`` and ``engine``.
    The job's progress counts documents; its ETA is this run's measured rate.

    Args:
        source: The corpus folder or zip (:func:`check_corpus_path`, :func:`save_upload`).
        configs: The configurations (lettered A, B, … in this order; a repeated one is refused).
        metrics: Of :data:`~backend.corpus.spec.CORPUS_METRICS` (``stats`` always).
        pairs: The quality metrics' pair budget (None or 0: every pair, exact).
        questions: The question set of ``retrieval``.
        questions_name: How tables name the set.
        settings: K, rules and δ of the quality metrics.
        retrieve: Chunks retrieved per question.
        engine: ``local`` or ``ray`` (:func:`available_engines`).
        workers: Ray's document tasks at once (None: its default).
        lm: The language model (None: the default).
        embedder: The embedder (None: the default).
        out: The output folder (None: :func:`default_out`).

    Raises:
        ParameterError: no configuration, a repeated one, an unknown metric or engine, retrieval
            without a question set, a folder holding another run's settings.
        InputError: the output folder cannot be read.
    """
    if engine not in available_engines():
        raise ParameterError(f"engine {engine!r} is not available here; choose one of: {', '.join(available_engines())}")
    if not configs:
        raise ParameterError("choose at least one configuration")
    spec = CorpusSpec(
        configs=tag_configs(configs), metrics=parse_corpus_metrics(metrics), settings=settings,
        pairs=pairs or None, questions=questions if "retrieval" in metrics else None,
        questions_name=questions_name if "retrieval" in metrics else None, retrieve=retrieve, lm=lm, embedder=embedder,
    )
    folder = out if out is not None else default_out(source, spec)
    previous = read_results(folder)
    if previous.run and previous.run.get("digest") != spec.digest():
        raise ParameterError(f"{folder} holds a corpus run with other settings; choose another output folder")
    wanted = [e.config.spec for e in spec.configs]
    resumed = sum(1 for r in previous.rows if r["config"] in wanted)
    names = ", ".join(e.tag for e in spec.configs)

    warm_embedder = engine == "local" and (
        any(m in ("ds", "retrieval") for m in spec.metrics) or any("embedder" in config_needs(c) for c in configs))

    def body(_scorer: Scorer | None, progress: Progress) -> CorpusRun:
        if warm_embedder:
            # Loaded once per process: the run's first document then does not pay for it, so the ETA
            # measured from the documents' own rate is not inflated by the load.
            load_embedder(embedder)
        eng = make_engine(engine, out=folder, workers=workers) if engine != "local" else "local"
        # The page's preview draws once a document's rows are written: each one is published.
        return run_corpus(source, spec, folder, engine=eng, progress=progress,
                          on_rows=lambda outcome: progress.publish(outcome.name))

    title = f"Corpus {source.name}: {names} on {engine}"
    signature = ("corpus", str(source.resolve()), spec.digest(), tuple(wanted), engine, str(folder))
    meta = MappingProxyType({"out": str(folder), "configs": tuple(wanted), "resumed": resumed, "source": str(source),
                             "engine": engine})
    return JobPlan(title, signature, body, model="the corpus run's models", meta=meta)


@dataclass(frozen=True)
class CorpusView:
    """What an output folder holds, for the page and the report.

    Attributes:
        out: The output folder.
        results: Its rows (only the configurations asked for) and skipped files.
        table: :func:`~backend.corpus.aggregate.aggregate_table` of the rows.
        metrics: The metrics with at least one value, in :data:`~backend.corpus.aggregate.AGGREGATE_METRICS` order.
        tags: The configurations' letters, in order, and their labels.
        documents: Documents with rows.
        errors: Rows of a configuration that failed on a document (``{"doc", "tag", "error"}``).
        verdict: :func:`~backend.report.corpus.corpus_verdict`.
    """

    out: Path
    results: CorpusResults
    table: tuple[dict[str, Any], ...]
    metrics: tuple[str, ...]
    tags: Mapping[str, str]
    documents: int
    errors: tuple[dict[str, str], ...]
    verdict: tuple[str, ...]

    @property
    def source(self) -> str:
        """The corpus path the run was given."""
        return str(self.results.run.get("source", ""))

    @property
    def questions_name(self) -> str | None:
        """The question set's name (None: no retrieval)."""
        return self.results.run.get("questions")

    def caption(self) -> str:
        """``214 rows: 107 documents × 2 configurations (A, B) · 3 files skipped · questions: sample:x``."""
        n = len(self.tags)
        parts = [f"{len(self.results.rows):,} rows: {self.documents:,} document{'s' if self.documents != 1 else ''} × "
                 f"{n} configuration{'s' if n != 1 else ''} ({', '.join(self.tags)})"]
        if self.results.skipped:
            parts.append(f"{len(self.results.skipped):,} file{'s' if len(self.results.skipped) != 1 else ''} skipped")
        if self.errors:
            parts.append(f"{len(self.errors):,} configuration error{'s' if len(self.errors) != 1 else ''}")
        if self.questions_name:
            parts.append(f"retrieval on {self.questions_name}")
        return " · ".join(parts)

    def metric_label(self, metric: str) -> str:
        """A metric's label (``IoU ↑``)."""
        return AGGREGATE_METRICS[metric].label

    def table_rows(self) -> list[dict[str, Any]]:
        """The aggregate table as the page shows it: one record per configuration and metric, with its label."""
        return [
            {"metric": AGGREGATE_METRICS[r["metric"]].label, "tag": r["tag"], "configuration": r["label"],
             "documents": r["documents"], "mean": r["mean"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
             "std": r["std"], "min": r["min"], "median": r["median"], "max": r["max"]}
            for r in self.table
        ]

    def distribution(self, metric: str, kind: str = "box") -> go.Figure:
        """The distribution of ``metric`` over the documents, one box (or violin) per configuration."""
        values = metric_values([r for r in self.results.rows if "error" not in r])
        return distribution_figure(values, metric, AGGREGATE_METRICS[metric].label, kind=kind, labels=self.tags)

    def disagreements(self, metric: str, top: int = 10) -> list[dict[str, Any]]:
        """The documents where the configurations' ``metric`` differs most, one flat record each (values by tag)."""
        out = []
        for d in disagreements(self.results.rows, metric, top=top):
            out.append({"doc": d["doc"], "spread": d["spread"], "scaled_spread": d["scaled_spread"],
                        "best": d["best"], "worst": d["worst"], **{t: d["values"].get(t) for t in self.tags}})
        return out

    def document_names(self) -> list[str]:
        """Every document with rows, in name order (what the page offers to open in Compare)."""
        return sorted({r["doc"] for r in self.results.rows})


def corpus_view(out: str | Path, configs: Sequence[str] | None = None) -> CorpusView:
    """Read the output folder ``out`` (as far as it is written) into a :class:`CorpusView`.

    Args:
        out: The output folder.
        configs: The configuration specs to keep (a folder may hold rows of configurations an
            earlier run had and this one dropped); None: every one.

    Raises:
        InputError: the folder is not a corpus run's.
    """
    raw = read_results(out)
    keep = set(configs) if configs is not None else None
    rows = tuple(r for r in raw.rows if keep is None or r["config"] in keep)
    results = CorpusResults(run=raw.run, rows=rows, skipped=raw.skipped)
    good = [r for r in rows if "error" not in r]
    table = tuple(aggregate_table(good)) if good else ()
    present = {r["metric"] for r in table if r["documents"]}
    tags: dict[str, str] = {}
    for r in sorted(rows, key=lambda r: r["tag"]):
        tags.setdefault(r["tag"], r["label"])
    errors = tuple({"doc": r["doc"], "tag": r["tag"], "error": r["error"]} for r in rows if "error" in r)
    return CorpusView(
        out=Path(out), results=results, table=table, metrics=tuple(m for m in AGGREGATE_METRICS if m in present),
        tags=MappingProxyType(tags), documents=len({r["doc"] for r in good}), errors=errors,
        verdict=tuple(corpus_verdict(results)) if good else (),
    )


def _document_root(view: CorpusView) -> Path:
    """Where the run read its documents: the corpus folder, or a zip's extraction folder inside ``out``."""
    source = Path(view.source)
    return source if source.is_dir() else view.out / EXTRACTED


def open_in_compare(view: CorpusView, name: str) -> tuple[Document, list[tuple[str, ChunkerConfig]]]:
    """What a click into Compare loads: document ``name`` as the run read it, and the run's lettered configurations.

    Raises:
        InputError: the document is not in the run, or can no longer be read (one line).
    """
    if name not in view.document_names():
        raise InputError(f"{name}: not a document of this corpus run")
    root = _document_root(view)
    path = root.joinpath(*name.split("/"))
    doc = load_corpus_document(CorpusFile(name, path))
    ran_on = {r.get("doc_id") for r in view.results.rows if r["doc"] == name}
    if doc.id not in ran_on:
        raise InputError(f"{name}: the file changed since the corpus run (its text is not the one the run measured)")
    configs = []
    seen: set[str] = set()
    for r in sorted(view.results.rows, key=lambda r: r["tag"]):
        if r["config"] in seen:
            continue
        seen.add(r["config"])
        spec_name, params, tokenizer = ChunkerConfig.parse(r["config"])
        configs.append((r["tag"], make_chunker(spec_name, params, tokenizer).config))
    return doc, configs
