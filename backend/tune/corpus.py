"""Tuning over a collection: one configuration's scores over a folder of documents, through the corpus engine.

``tune DIR`` scores each trial's configuration on every document of the folder with the questions
about that document (each document is evaluated on its own questions, retrieving from its own
chunks only: ``cross_corpus=False``). Rather than a loop of its own, a trial is a corpus run
(:func:`backend.corpus.engine.run_corpus`) of one configuration, so it runs on this machine or as
Ray tasks (``engine="ray"``) with the same numbers, and its rows land in the corpus output folder
the caller names, one folder per question subset (e.g. ``out/corpus-tuning``, ``out/corpus-held-out``).

Successive trials write into the same folder: a corpus run's digest leaves the configurations out
and its rows are keyed by (document, configuration spec), so a configuration already scored there
(an earlier trial, or a killed run resumed) is read back, not recomputed. Each configuration gets
its own tag in the folder (``T1``, ``T2``… in the order first scored), so the folder also reads as
an ordinary corpus run on the Corpus page.

:func:`corpus_questions` makes the question set such a run needs: model-free questions generated
on each document (saved in the Chroma format under ``out/questions``, so a resumed run reuses
them), or a set given as a CSV (or a bundled ``sample:NAME``) whose corpora are the folder's documents.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from backend.chunking import ChunkerConfig, ConfigEntry
from backend.corpus.engine import EXTRACTED, make_engine, run_corpus
from backend.corpus.inputs import corpus_inputs
from backend.corpus.results import read_results, read_run
from backend.corpus.spec import CorpusSpec
from backend.corpus.work import RETRIEVAL_COLUMNS, load_corpus_document
from backend.errors import ChunkLabError, InputError, ParameterError, one_line
from backend.progress import Progress
from backend.retrieval.modelfree import model_free_questions
from backend.retrieval.questions import (
    QuestionSet,
    load_question_set,
    load_sample_question_set,
    save_question_set,
)
from backend.text.document import Document

__all__ = ["CorpusScores", "QUESTIONS_DIR", "QUESTIONS_PER_DOCUMENT", "corpus_questions", "corpus_scores"]

QUESTIONS_DIR = "questions"  # where corpus_questions saves a generated set, inside the run's folder
QUESTIONS_PER_DOCUMENT = 10  # model-free questions asked of each document
_MANIFEST = "generated.json"  # how the saved set was made (a resumed run must ask for the same)
_METHODS = ("model-free",)


@dataclass(frozen=True)
class CorpusScores:
    """One configuration's scores over a folder of documents (:func:`corpus_scores`).

    Attributes:
        per_question: ``recall``, ``precision``, ``precision_omega``, ``iou`` → one value per question of the
            question set, in its order (NaN for a question whose document gave no row: see ``warnings``).
        chunks: Chunks over all documents scored.
        mean_tokens: Mean tokens per chunk over all documents scored.
        max_tokens: The longest chunk's tokens.
        index_cost: Tokens embedded to index the documents (the sum of chunk tokens).
        seconds: Wall time of the call (a configuration read back from the folder costs next to nothing).
        documents: The documents scored (their corpus names, in name order).
        warnings: One line each: documents that gave no row for this configuration, and the questions left NaN.
    """

    per_question: Mapping[str, tuple[float, ...]]
    chunks: int
    mean_tokens: float
    max_tokens: int
    index_cost: int
    seconds: float
    documents: tuple[str, ...]
    warnings: tuple[str, ...] = field(default=())


def _entry(out: Path, config: ChunkerConfig) -> ConfigEntry:
    """The configuration's entry in the folder: the tag it was first scored under there, else the next free one."""
    run = read_run(out)
    known = {c.get("spec"): c.get("tag") for c in run.get("configs", []) if isinstance(c, Mapping)}
    if isinstance(known.get(config.spec), str):
        tag = known[config.spec]
    else:
        n = len(known) + 1
        while f"T{n}" in known.values():
            n += 1
        tag = f"T{n}"
    return ConfigEntry(0, tag, config)


def _set_name(questions: QuestionSet) -> str:
    n, d = len(questions), len(questions.corpus_ids)
    return f"{n} question{'s' if n != 1 else ''} on {d} document{'s' if d != 1 else ''}"


def _names(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def corpus_scores(config: ChunkerConfig, source: Path, questions: QuestionSet, *, engine: str = "local",
                  out: Path, workers: int | None = None, address: str | None = None,
                  progress: Progress | None = None) -> CorpusScores:
    """Score ``config`` on every document of ``source`` with its own questions of ``questions``, via the corpus engine.

    The rows go to the corpus output folder ``out`` (:mod:`backend.corpus.results`): one folder per
    question set, shared by every configuration scored on it; a configuration already there is read
    back, not run again.

    Args:
        config: The configuration.
        source: The folder (or zip) of documents.
        questions: Questions whose corpora are the folder's documents (:func:`corpus_questions`, or a subset).
        engine: ``local`` (this process) or ``ray`` (documents as Ray tasks: ``address`` joins a
            cluster, else a local Ray is started for the call unless one is already initialized).
        out: The corpus output folder of this question set.
        workers: Ray's documents in flight at once (None: its default).
        address: The Ray cluster to join (``ray`` only).
        progress: Counts documents; its cancel token stops the call between documents (what was written stays).

    Returns:
        The scores; their per-question values follow ``questions``' order.

    Raises:
        ParameterError: an unknown engine, Ray options without Ray, an empty question set, or ``out``
            holding a corpus run with another question set.
        InputError: the folder holds no readable document, or the configuration failed on every one (its error).
        ModelError: a model cannot be loaded, or Ray cannot be started or joined.
    """
    if len(questions) == 0:
        raise ParameterError("the question set has no questions")
    out = Path(out)
    spec = CorpusSpec(configs=(_entry(out, config),), metrics=("stats", "retrieval"), questions=questions,
                      questions_name=_set_name(questions))
    eng = make_engine(engine, out=out, address=address, workers=workers)
    run = run_corpus(source, spec, out, engine=eng, progress=progress)
    results = read_results(out)
    rows = sorted((r for r in results.rows if r["config"] == config.spec), key=lambda r: r["doc"])
    good = [r for r in rows if r.get("error") is None]
    failed = [r for r in rows if r.get("error") is not None]
    if not good:
        if failed:
            raise InputError(f"{config.spec} failed on every document of {source}; {failed[0]['doc']}: {failed[0]['error']}")
        raise InputError(f"{source}: no document could be read (see {out / 'skipped.jsonl'})")

    index = {cid: [] for cid in questions.corpus_ids}
    for i, q in enumerate(questions.questions):
        index[q.corpus_id].append(i)
    values = {m: [math.nan] * len(questions) for m in RETRIEVAL_COLUMNS}
    scored: set[int] = set()
    for r in good:
        ret = r.get("retrieval") or {}
        corpora = set(ret.get("corpora") or ())
        positions = [i for i, q in enumerate(questions.questions) if q.corpus_id in corpora]
        if not positions:
            continue  # a document none of the questions is about
        per = ret.get("per_question") or {}
        for m in RETRIEVAL_COLUMNS:
            got = per.get(m)
            if got is None or len(got) != len(positions):
                raise InputError(f"{out}: the row of {r['doc']} does not hold one {m} per question of its corpora "
                                 "(written by an older version?); use another output folder")
            for i, v in zip(positions, got, strict=True):
                values[m][i] = math.nan if v is None else float(v)
        scored.update(positions)

    warnings = []
    if failed:
        warnings.append(f"{config.spec} failed on {len(failed)} document{'s' if len(failed) != 1 else ''} "
                        f"({_names([r['doc'] + ': ' + r['error'] for r in failed], 2)})")
    unscored = [cid for cid, idx in index.items() if not set(idx) <= scored]
    if unscored:
        n = len(questions) - len(scored)
        skipped = sorted(s["doc"] for s in run.skipped)
        why = f"; files skipped: {_names(skipped)} (see {out / 'skipped.jsonl'})" if skipped else ""
        warnings.append(f"{n} question{'s' if n != 1 else ''} left unscored (NaN): no document of {source} "
                        f"gave a row for their corpus {_names(unscored)}{why}")

    chunks = sum(int(r["chunks"]) for r in good)
    tokens = sum(float(r["mean_tokens"]) * int(r["chunks"]) for r in good)
    return CorpusScores(
        per_question={m: tuple(values[m]) for m in RETRIEVAL_COLUMNS},
        chunks=chunks,
        mean_tokens=tokens / chunks if chunks else 0.0,
        max_tokens=max(int(r["max_tokens"]) for r in good),
        index_cost=round(tokens),
        seconds=run.seconds,
        documents=tuple(r["doc"] for r in good),
        warnings=tuple(one_line(w) for w in warnings),
    )


# --- the question set of a folder ----------------------------------------------------------------


def _documents(source: Path, out: Path) -> list[tuple[str, Document]]:
    """The folder's readable documents by corpus name (a zip extracted where a corpus run extracts it)."""
    inputs = corpus_inputs(source, extract_to=out / QUESTIONS_DIR / EXTRACTED)
    docs = []
    for f in inputs.files:
        try:
            docs.append((f.name, load_corpus_document(f)))
        except ChunkLabError:
            continue  # the corpus run lists it as skipped, with its reason
    if not docs:
        raise InputError(f"{source}: holds no readable document")
    return docs


def _corpus_ids(names: Sequence[str]) -> dict[str, str]:
    """A corpus id per document name (``notes/kestrel.md`` → ``notes_kestrel.md``), unique."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:120] or "document"
        cid, k = base, 2
        while cid in used:
            cid, k = f"{base}-{k}", k + 1
        used.add(cid)
        out[name] = cid
    return out


def _generated(source: Path, method: str, *, out: Path, seed: int, per_document: int) -> QuestionSet:
    """Questions generated on each document, saved under ``out/questions`` (and read back from there)."""
    folder = out / QUESTIONS_DIR
    csv_path = folder / "questions.csv"
    docs = _documents(source, out)
    manifest = {"method": method, "seed": seed, "per_document": per_document,
                "documents": {name: doc.id for name, doc in docs}}
    if csv_path.is_file() and (folder / _MANIFEST).is_file():
        try:
            saved = json.loads((folder / _MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise InputError(f"{folder / _MANIFEST}: unreadable ({e})") from None
        if saved != manifest:
            raise ParameterError(f"{out} holds questions generated with other settings or on other documents; "
                                 "use another output folder, or the same settings to resume")
        return load_question_set(csv_path)
    ids = _corpus_ids([name for name, _ in docs])
    qset = QuestionSet((), {})
    for name, doc in docs:
        made = model_free_questions(doc, n=per_document, corpus_id=ids[name], seed=seed)
        if made.questions:
            qset = qset.with_questions(made.questions, {ids[name]: doc.text})
    if len(qset) == 0:
        raise InputError(f"{source}: no document has a passage to ask a model-free question about")
    save_question_set(qset, csv_path)
    (folder / _MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return qset


def _check_on_folder(qset: QuestionSet, source: Path, out: Path, what: str) -> QuestionSet:
    """``qset`` when every corpus it asks about is the text of a document of ``source``; else a one-line error."""
    docs = _documents(source, out)
    ids = {doc.id for _, doc in docs}
    texts = {doc.text for _, doc in docs}
    document_ids = qset.document_ids
    for cid in qset.corpus_ids:
        if document_ids[cid] not in ids and qset.corpora[cid] not in texts:
            raise InputError(f"{what}: corpus {cid!r} matches no document of {source} (its text is none of theirs); "
                             "give a question set written on the folder's documents")
    return qset


def corpus_questions(source: Path, questions: str, *, out: Path, seed: int, corpora: Path | None = None,
                     per_document: int = QUESTIONS_PER_DOCUMENT) -> QuestionSet:
    """The question set of a tuning run over a folder: generated on each document, or given.

    Args:
        source: The folder (or zip) of documents.
        questions: ``generate:model-free`` (:func:`~backend.retrieval.modelfree.model_free_questions` on each
            readable document, saved as ``out/questions/questions.csv`` with its ``corpora/``; a resumed run
            with the same seed, count and documents reads them back), a Chroma-format CSV path whose corpora
            are the folder's documents, or ``sample:NAME`` (a bundled set, whose corpus must be in the folder).
        out: The tuning run's output folder.
        seed: Seeds the generated questions.
        corpora: The CSV's corpora folder (default: ``corpora/`` beside it).
        per_document: Questions generated per document.

    Raises:
        ParameterError: an unknown generation method, ``per_document`` below 1, or ``out`` holding questions
            generated with other settings.
        InputError: an unreadable set, a corpus matching no document of the folder, a folder with no
            readable document.
    """
    source, out = Path(source), Path(out)
    if questions.startswith("generate:"):
        method = questions.split(":", 1)[1]
        if method not in _METHODS:
            raise ParameterError(f"cannot generate questions by {method!r} over a folder; choose generate:"
                                 + ", generate:".join(_METHODS))
        if per_document < 1:
            raise ParameterError(f"per_document ({per_document}) must be at least 1")
        return _generated(source, method, out=out, seed=seed, per_document=per_document)
    if questions.startswith("sample:"):
        return _check_on_folder(load_sample_question_set(questions.split(":", 1)[1]), source, out, questions)
    return _check_on_folder(load_question_set(questions, corpora), source, out, questions)
