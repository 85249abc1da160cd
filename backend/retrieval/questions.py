"""Question sets in the Chroma format: questions with excerpt spans over a folder of corpora.

The format of the Chroma report's repository (``chunking_evaluation``):

- a CSV with the columns ``question``, ``references`` and ``corpus_id`` (other columns are
  ignored), where ``references`` is a JSON list of
  ``{"content": …, "start_index": …, "end_index": …}`` — character offsets into the corpus;
- a folder of corpora, one file per ``corpus_id``: ``<corpus_id>.md`` or ``<corpus_id>.txt``
  (an id that is a path, as the reference's generator writes, is looked up by its file name).

A corpus is read the way the reference reads it (``open(path).read()``: UTF-8, universal
newlines), because the offsets of a Chroma-format set index exactly that string. A set Chunk
Lab generated from a ``.md``/``.txt`` indexes the document's text instead, which the loaders
normalize (trailing spaces go): when a corpus's references do not fit the file as read but
all fit it as the loaders read it (:func:`~backend.loaders.normalize.normalize_text`), that
text is the corpus. So a set's corpora may be the ``corpora/`` folder written beside its CSV
or the original files. Every reference is checked on import: its offsets must be inside the
corpus and ``corpus[start_index:end_index]`` must equal its ``content``; the first bad row is
reported in one line naming the row, the reference, both texts and what to give instead.
Export writes the same format back (files, or one zip), and re-importing it gives an equal set.
Uploaded files (a name and bytes each, as a browser hands them over) go through
:func:`question_set_from_files`, a folder on disk through :func:`load_question_set`; both read
corpora with :func:`read_corpus_text` and validate with :func:`parse_questions_csv`.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import re
import threading
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Iterable, Mapping, Sequence

from backend.errors import ChunkLabError, InputError, ParameterError
from backend.loaders import load_bytes
from backend.loaders.normalize import normalize_text
from backend.samples import get_question_set
from backend.text.document import Document

__all__ = [
    "Reference",
    "Question",
    "QuestionSet",
    "CORPUS_SUFFIXES",
    "HAND_WRITTEN",
    "joined_method",
    "method_path",
    "corpus_id_for",
    "corpus_document_id",
    "corpus_document",
    "corpus_file_name",
    "read_corpus_text",
    "corpora_from_files",
    "parse_questions_csv",
    "question_set_from_files",
    "merge_question_sets",
    "questions_to_csv",
    "load_question_set",
    "load_sample_question_set",
    "save_question_set",
    "question_set_zip",
]

CORPUS_SUFFIXES = (".md", ".txt")
HAND_WRITTEN = "hand-written"
COLUMNS = ("question", "references", "corpus_id")
_CORPUS_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_FIELD_LIMIT = 1 << 28  # a references cell may quote long excerpts; csv's default cap is 128 KiB


@dataclass(frozen=True)
class Reference:
    """One excerpt: ``content`` is ``corpus[start:end]`` exactly."""

    content: str
    start: int
    end: int

    def to_json(self) -> dict[str, Any]:
        """The Chroma format's reference object."""
        return {"content": self.content, "start_index": self.start, "end_index": self.end}


@dataclass(frozen=True)
class Question:
    """A question, its excerpts (at least one) and the corpus they are in."""

    question: str
    references: tuple[Reference, ...]
    corpus_id: str

    @property
    def spans(self) -> list[tuple[int, int]]:
        """The excerpts' ``(start, end)`` ranges."""
        return [(r.start, r.end) for r in self.references]


@dataclass(frozen=True, eq=False)
class QuestionSet:
    """Questions over one or more corpora.

    Attributes:
        questions: In file order (the order results are reported in).
        corpora: ``corpus_id`` → the corpus text the offsets index.
        suffixes: ``corpus_id`` → the file suffix it was read from (``.md`` by default on export).
        method: How the questions were made: ``hand-written`` (the bundled sets), a generation
            method (``chat``, ``bundled``, ``model-free``, ``model-free keywords``), several joined
            by ``" + "`` for a merged set, or ``""`` when not known (a CSV without its
            ``.method`` file). Saved beside the CSV (:func:`save_question_set`).
    """

    questions: tuple[Question, ...]
    corpora: Mapping[str, str]
    suffixes: Mapping[str, str] = field(default_factory=dict)
    method: str = ""
    _docs: dict[str, Document] = field(default_factory=dict, repr=False)
    _document_ids: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        for cid, suffix in self.suffixes.items():
            # A suffix comes from an uploaded session too: it becomes part of a written file name.
            if suffix not in CORPUS_SUFFIXES:
                allowed = ", ".join(CORPUS_SUFFIXES)
                raise InputError(f"corpus {cid[:60]!r}: file suffix {suffix[:20]!r} is not one of {allowed}")
        for i, q in enumerate(self.questions, 1):
            if q.corpus_id not in self.corpora:
                raise InputError(f"question {i}: corpus {q.corpus_id!r} is missing")
            _check_question(q, self.corpora[q.corpus_id], f"question {i}")

    def __len__(self) -> int:
        return len(self.questions)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, QuestionSet)
            and self.questions == other.questions
            and dict(self.corpora) == dict(other.corpora)
        )

    __hash__ = None  # type: ignore[assignment]

    def __getstate__(self) -> dict[str, Any]:
        # Pickled (e.g. sent to a Ray worker) without its lock and its caches: a lock cannot be pickled.
        return {"questions": self.questions, "corpora": dict(self.corpora), "suffixes": dict(self.suffixes),
                "method": self.method}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = {"method": "", **state}  # pickled before sets stated their method
        for name, value in state.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_docs", {})
        object.__setattr__(self, "_document_ids", {})
        object.__setattr__(self, "_lock", threading.Lock())

    @property
    def corpus_ids(self) -> list[str]:
        """The corpora the questions use, in order of first use."""
        return list(dict.fromkeys(q.corpus_id for q in self.questions))

    @property
    def document_ids(self) -> dict[str, str]:
        """``corpus_id`` → the id of the :class:`Document` its text loads as (:func:`corpus_document_id`).

        Every question set records which document(s) it was written on this way: a document
        whose :attr:`Document.id` is one of these values is the corpus of those questions.
        """
        with self._lock:
            if not self._document_ids:
                self._document_ids.update({cid: corpus_document_id(text) for cid, text in self.corpora.items()})
            return dict(self._document_ids)

    def corpora_of(self, doc: Document) -> list[str]:
        """The corpus ids whose text is ``doc``'s text (in the set's order of use; [] when none is).

        A corpus is ``doc``'s text when it loads as ``doc``'s text (:attr:`document_ids`), or is
        that very string (a document built from text that no loader normalized).
        """
        ids = self.document_ids
        return [cid for cid in self.corpus_ids if doc.id == ids[cid] or self.corpora[cid] == doc.text]

    def on_document(self, doc: Document) -> QuestionSet | None:
        """The questions of this set whose corpus is ``doc``'s text, as a set of their own; None when none is.

        A corpus is ``doc``'s text when it loads as the same text (:func:`corpus_document_id`):
        a bundled sample opened as the document matches its bundled set, an upload of the same
        text under another name matches too, and a set made with :meth:`from_document` matches
        its document.
        """
        wanted = set(self.corpora_of(doc))
        if not wanted:
            return None
        return QuestionSet(
            tuple(q for q in self.questions if q.corpus_id in wanted),
            {cid: text for cid, text in self.corpora.items() if cid in wanted},
            {cid: s for cid, s in self.suffixes.items() if cid in wanted},
            self.method,
        )

    def document(self, corpus_id: str) -> Document:
        """The corpus as a :class:`Document`, read as ``index`` reads its file (:func:`corpus_document`; built once)."""
        with self._lock:
            doc = self._docs.get(corpus_id)
            if doc is None:
                if corpus_id not in self.corpora:
                    raise ParameterError(f"no corpus {corpus_id!r} in this question set")
                doc = self._docs[corpus_id] = corpus_document(
                    self.corpora[corpus_id], corpus_file_name(self, corpus_id)
                )
            return doc

    def with_questions(
        self,
        questions: Iterable[Question],
        corpora: Mapping[str, str] | None = None,
        suffixes: Mapping[str, str] | None = None,
        method: str | None = None,
    ) -> QuestionSet:
        """A new set with ``questions`` appended (and ``corpora`` added, with their ``suffixes``), validated.

        A corpus this set already holds keeps its suffix. ``method`` is how the added questions
        were made (None: as this set's); the new set's is both joined (:func:`joined_method`).
        """
        merged = dict(self.corpora)
        for cid, text in (corpora or {}).items():
            if cid in merged and merged[cid] != text:
                raise ParameterError(f"corpus {cid!r} already exists with a different text")
            merged[cid] = text
        joined = self.method if method is None else joined_method(self.method, method)
        return QuestionSet(self.questions + tuple(questions), merged, {**(suffixes or {}), **self.suffixes}, joined)

    def with_method(self, method: str) -> QuestionSet:
        """This set, stating that its questions were made by ``method``."""
        return QuestionSet(self.questions, self.corpora, self.suffixes, method)

    @classmethod
    def from_document(cls, doc: Document, questions: Iterable[Question] = (), corpus_id: str | None = None) -> QuestionSet:
        """A set over one document (its text is the corpus), e.g. to save marks made on the live query page.

        Questions whose ``corpus_id`` differs from ``corpus_id`` are moved to it.
        """
        cid = corpus_id or corpus_id_for(doc)
        moved = tuple(q if q.corpus_id == cid else Question(q.question, q.references, cid) for q in questions)
        return cls(moved, {cid: doc.text})


def _check_shape(q: Question, where: str) -> None:
    if not q.question.strip():
        raise InputError(f"{where}: the question is empty")
    if not q.references:
        raise InputError(f"{where}: no references")


def _check_question(q: Question, text: str, where: str) -> None:
    _check_shape(q, where)
    problem = _mismatch(q, text, where)
    if problem is not None:
        raise InputError(problem)


def _mismatch(q: Question, text: str, where: str, reading: str = "", has: str = "the corpus") -> str | None:
    """Why ``q``'s references do not index ``text`` (the first bad one), or None when they all do.

    ``reading`` follows the corpus's name (`` as written or as loaded``), ``has`` names ``text``.
    """
    corpus = f"corpus {q.corpus_id!r}{reading}"
    for j, r in enumerate(q.references, 1):
        if not 0 <= r.start < r.end <= len(text):
            return (
                f"{where}: reference {j} offsets [{r.start}, {r.end}) are outside {corpus} "
                f"({len(text)} characters) or empty"
            )
        if text[r.start : r.end] != r.content:
            found = text[r.start : r.end]
            return (
                f"{where}: reference {j} content does not match {corpus} at "
                f"[{r.start}, {r.end}): expected {_preview(r.content)}, {has} has {_preview(found)}"
            )
    return None


class _Readings:
    """Which text each corpus's references index: the file as written, or as Chunk Lab's loaders read it.

    A Chroma-format set indexes the corpus as the reference reads it (:func:`read_corpus_text`);
    a set Chunk Lab generated from a ``.md``/``.txt`` indexes the document's text, which the
    loaders normalize (:func:`~backend.loaders.normalize.normalize_text`: trailing spaces, the
    final newline…). Both readings of one file are tried, so ``--corpora`` may name the folder
    of the original files as well as the ``corpora/`` written beside the CSV. One reading holds
    for all the questions of a corpus.
    """

    _HINT = "; use the corpus the questions were made on (corpora/ beside their CSV)"
    _AS = {True: "as written", False: "as loaded"}

    def __init__(self, corpora: Mapping[str, str]) -> None:
        self._corpora = corpora
        self.texts: dict[str, str] = {}
        self._seen: dict[str, list[Question]] = {}

    def check(self, q: Question, where: str) -> None:
        """Check ``q`` (row ``where``) against its corpus, switching to the loaded reading when only it fits.

        Raises:
            InputError: ``q``'s references index neither reading, or not the one the earlier
                questions of its corpus index.
        """
        _check_shape(q, where)
        cid = q.corpus_id
        raw = self._corpora[cid]
        text = self.texts.get(cid, raw)
        seen = self._seen.setdefault(cid, [])
        if _mismatch(q, text, where) is not None:
            loaded = normalize_text(raw)
            # A loaded text that is a prefix (only the final newline dropped) fits no excerpt the file does not.
            switch = text is raw and not raw.startswith(loaded)
            if switch and all(_mismatch(p, loaded, where) is None for p in (*seen, q)):
                text = loaded
            else:
                raise InputError(self._problem(q, where, text is raw, raw, loaded))
        self.texts[cid] = text
        seen.append(q)

    def _problem(self, q: Question, where: str, as_written: bool, raw: str, loaded: str) -> str:
        """Why ``q`` does not fit, in one line: against the reading closer to its excerpts, and what to give instead."""
        if raw.startswith(loaded):
            return f"{_mismatch(q, raw, where)}{self._HINT}"
        if _mismatch(q, loaded if as_written else raw, where) is None:
            return (
                f"{where}: its references index corpus {q.corpus_id!r} {self._AS[not as_written]}, the rows "
                f"before it {self._AS[as_written]}{self._HINT}"
            )
        closer = max((raw, loaded), key=lambda t: _closeness(q, t))
        has = "the file" if closer is raw else "the loaded text"
        return f"{_mismatch(q, closer, where, ' as written or as loaded', has)}{self._HINT}"


def _closeness(q: Question, text: str) -> float:
    """How much of ``q``'s excerpts ``text`` holds where they say: the references that fit, and the next one's likeness."""
    fit = 0.0
    for r in q.references:
        found = text[r.start : r.end] if 0 <= r.start < r.end <= len(text) else ""
        if found != r.content:
            # The first 1,000 characters tell the readings apart; the comparison is quadratic.
            return fit + difflib.SequenceMatcher(None, r.content[:1000], found[:1000]).ratio()
        fit += 1
    return fit


def _preview(text: str, n: int = 40) -> str:
    """``text`` quoted on one line (repr escapes newlines), shortened to ``n`` characters."""
    return repr(text if len(text) <= n else text[: n - 1] + "…")


def corpus_id_for(doc: Document) -> str:
    """A corpus id for a document: its file stem reduced to ``[A-Za-z0-9._-]`` (``corpus`` if nothing is left)."""
    stem = Path(doc.source).stem if doc.source else ""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._-")
    return cleaned[:128] if cleaned else "corpus"


def corpus_document_id(text: str) -> str:
    """The :attr:`Document.id` a corpus text has once loaded as a document.

    A corpus is read the way the reference reads it (offsets index that exact string); Chunk
    Lab's loaders normalize a file's text (:func:`~backend.loaders.normalize.normalize_text`:
    line breaks, trailing whitespace, the final newline). The id is taken of the normalized
    text, so a corpus file and the same file opened as the document have one id.
    """
    # Only the id is wanted: no paragraphs, no language detection.
    return Document(text=normalize_text(text), source="", kind="txt", pages=(), paragraphs=()).id


def corpus_document(text: str, name: str) -> Document:
    """The :class:`Document` a corpus text is chunked and indexed as: the one its file loads as.

    ``eval`` and ``index`` (and the app's pages) must read one corpus as one text, or one
    configuration gets two collections per corpus (``eval`` read the narrative sample with its
    final newline, 16,295 characters, ``index sample:narrative`` without it, 16,294). So the
    corpus goes through the loaders' own :func:`~backend.loaders.load_bytes`, which ``index``
    reaches through ``load_document``: the same normalization, paragraphs and id.

    The questions' offsets index the corpus text as the reference reads it
    (:func:`read_corpus_text`), or the loaded text itself (a set generated from the file:
    then loading changes nothing). Loading keeps them when it only drops trailing whitespace (the
    loaded text is a prefix of the corpus): then the loaded document is returned. When it
    changes more (text not in NFC, trailing spaces on a line, leading blank lines, control
    characters), the offsets would move: the corpus text is kept unchanged, as the reference
    keeps it, and ``index`` of that file makes another collection than ``eval``.

    Args:
        text: The corpus text (as :func:`read_corpus_text` gives it).
        name: Its file name (``<corpus_id>.md`` or ``.txt``: the format and ``Document.source``).
    """
    data = text.encode("utf-8", "surrogatepass")
    try:
        loaded: Document | None = load_bytes(data, name, max_bytes=max(1, len(data)))
    except ChunkLabError:  # nothing but whitespace, or not readable as its suffix says: keep the text as it is
        loaded = None
    if loaded is not None and text.startswith(loaded.text):
        return loaded
    kind = "txt" if name.lower().endswith(".txt") else "md"
    return Document.from_text(text, source=name, kind=kind)


def corpus_file_name(questions: QuestionSet, corpus_id: str) -> str:
    """The file name of a corpus in the Chroma format: ``<corpus_id>.md``, or ``.txt`` when it was read from one.

    An id that is a path (as the reference's generator writes) gives its last part: the name
    never holds a folder, so a zip or an export cannot place a file outside its folder.

    Args:
        questions: The set holding the corpus.
        corpus_id: The corpus id.
    """
    name = f"{corpus_id}{questions.suffixes.get(corpus_id, '.md')}"
    return name.replace("\\", "/").rsplit("/", 1)[-1]


def read_corpus_text(data: bytes, name: str = "corpus") -> str:
    """A corpus file's text as the reference reads it: UTF-8, ``\\r\\n`` and ``\\r`` read as ``\\n``.

    Raises:
        InputError: not UTF-8.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"corpus {name} is not UTF-8 text (byte {e.start})") from e
    return text.replace("\r\n", "\n").replace("\r", "\n")


def corpora_from_files(files: Iterable[tuple[str, bytes]]) -> tuple[dict[str, str], dict[str, str]]:
    """Corpus files given by name and content (e.g. uploaded) → ``({corpus_id: text}, {corpus_id: suffix})``.

    The corpus id is the file's stem; each text is read by :func:`read_corpus_text`.

    Args:
        files: ``(file name, bytes)`` pairs.

    Raises:
        InputError: a file that is not ``.md``/``.txt``, not UTF-8, or two files with one id.
    """
    corpora: dict[str, str] = {}
    suffixes: dict[str, str] = {}
    for name, data in files:
        path = PurePath(name)
        if path.suffix.lower() not in CORPUS_SUFFIXES:
            raise InputError(f"{name}: a corpus is a .md or .txt file named <corpus_id>.md")
        cid = path.stem
        if cid in corpora:
            raise InputError(f"two corpus files are named {cid} (.md and .txt?): keep one")
        corpora[cid] = read_corpus_text(data, name)
        suffixes[cid] = path.suffix.lower()
    return corpora, suffixes


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise ValueError(what)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    raise ValueError(what)


def _parse_references(raw: str, where: str) -> tuple[Reference, ...]:
    try:
        items = json.loads(raw)
    except ValueError as e:
        raise InputError(f"{where}: references is not JSON ({e.msg} at character {e.pos})") from e
    if not isinstance(items, list):
        raise InputError(f"{where}: references must be a JSON list, got {type(items).__name__}")
    out = []
    for j, item in enumerate(items, 1):
        if not isinstance(item, dict) or not {"content", "start_index", "end_index"} <= item.keys():
            raise InputError(f"{where}: reference {j} needs content, start_index and end_index")
        if not isinstance(item["content"], str):
            raise InputError(f"{where}: reference {j} content must be a string")
        try:
            start = _int(item["start_index"], "start_index")
            end = _int(item["end_index"], "end_index")
        except ValueError as e:
            raise InputError(f"{where}: reference {j} {e} must be an integer") from e
        out.append(Reference(item["content"], start, end))
    return tuple(out)


def parse_questions_csv(
    data: str | bytes,
    corpora: Mapping[str, str],
    *,
    name: str = "questions.csv",
    suffixes: Mapping[str, str] | None = None,
) -> QuestionSet:
    """A question set from CSV text and the corpora it refers to (e.g. uploaded files).

    Args:
        data: The CSV (bytes are read as UTF-8).
        corpora: ``corpus_id`` → corpus text (see :func:`read_corpus_text`). A corpus whose
            references fit only its text as the loaders normalize it (a set generated from the
            original ``.md``/``.txt``) is that normalized text in the set.
        name: The CSV's name, for error messages.
        suffixes: ``corpus_id`` → file suffix, remembered for export.

    Raises:
        InputError: a missing column, a malformed row, a missing corpus or a reference whose
            offsets do not match its corpus in either reading (naming the row: row 1 is the
            first after the header).
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise InputError(f"{name} is not UTF-8 (byte {e.start})") from e
    if csv.field_size_limit() < _FIELD_LIMIT:
        csv.field_size_limit(_FIELD_LIMIT)
    reader = csv.DictReader(io.StringIO(data.lstrip("\ufeff"), newline=""))
    header = reader.fieldnames or []
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise InputError(f"{name}: missing column {missing[0]!r}; a Chroma question set has {', '.join(COLUMNS)}")
    questions = []
    readings = _Readings(corpora)
    try:
        for i, row in enumerate(reader, 1):
            where = f"{name} row {i}"
            if None in row:
                raise InputError(f"{where}: more fields than the header has")
            question, corpus_id = (row.get("question") or ""), (row.get("corpus_id") or "").strip()
            if corpus_id not in corpora:
                raise InputError(f"{where}: no corpus file for corpus_id {corpus_id!r} (expected {corpus_id}.md or .txt)")
            q = Question(question, _parse_references(row.get("references") or "", where), corpus_id)
            readings.check(q, where)
            questions.append(q)
    except csv.Error as e:
        raise InputError(f"{name}: malformed CSV at line {reader.line_num}: {e}") from e
    if not questions:
        raise InputError(f"{name} holds no questions")
    used = readings.texts
    return QuestionSet(
        tuple(questions),
        {cid: used[cid] for cid in corpora if cid in used},
        {cid: s for cid, s in (suffixes or {}).items() if cid in used},
    )


def joined_method(a: str, b: str) -> str:
    """How a merged set's questions were made: ``a``, or ``a + b`` when they differ ("" when one is not known)."""
    if not a or not b:
        return ""
    parts = list(dict.fromkeys(a.split(" + ") + b.split(" + ")))
    return " + ".join(parts)


def merge_question_sets(base: QuestionSet | None, more: QuestionSet) -> QuestionSet:
    """``more``'s questions appended to ``base`` (``more`` itself when there is no base), corpora and suffixes joined.

    Raises:
        ParameterError: a corpus id both sets hold with different texts.
    """
    if base is None:
        return more
    return base.with_questions(more.questions, more.corpora, more.suffixes, more.method)


def question_set_from_files(
    data: str | bytes, corpus_files: Iterable[tuple[str, bytes]], *, name: str = "questions.csv"
) -> QuestionSet:
    """A question set from a CSV and corpus files given by name and content (an upload of the Chroma format).

    Args:
        data: The CSV (bytes are read as UTF-8).
        corpus_files: ``(file name, bytes)`` of each corpus, named ``<corpus_id>.md`` or ``.txt``.
        name: The CSV's name, for error messages.

    Raises:
        InputError: a bad corpus file (see :func:`corpora_from_files`) or a bad CSV (see
            :func:`parse_questions_csv`).
    """
    corpora, suffixes = corpora_from_files(corpus_files)
    return parse_questions_csv(data, corpora, name=name, suffixes=suffixes)


def questions_to_csv(questions: QuestionSet | Sequence[Question]) -> str:
    """The Chroma-format CSV of ``questions`` (header ``question,references,corpus_id``)."""
    rows = questions.questions if isinstance(questions, QuestionSet) else questions
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for q in rows:
        writer.writerow([q.question, json.dumps([r.to_json() for r in q.references]), q.corpus_id])
    return buf.getvalue()


def _corpus_file(corpora_dir: Path, corpus_id: str) -> Path | None:
    """``<corpus_id>.md`` or ``.txt`` in ``corpora_dir``.

    The reference's own generator uses the corpus *path* as its id (``corpora/x.md``): such an
    id is looked up by its file name (and stem) inside ``corpora_dir``, never outside it.
    """
    names = []
    if _CORPUS_ID.match(corpus_id):
        names += [f"{corpus_id}{suffix}" for suffix in CORPUS_SUFFIXES]
    base = corpus_id.replace("\\", "/").rsplit("/", 1)[-1]
    if base and base not in (".", ".."):
        names.append(base)
        names += [f"{Path(base).stem}{suffix}" for suffix in CORPUS_SUFFIXES]
    for name in dict.fromkeys(names):
        path = corpora_dir / name
        if path.is_file():
            return path
    return None


def load_sample_question_set(name: str) -> QuestionSet:
    """A bundled sample's question set (:func:`backend.samples.list_question_sets`), validated like any import.

    Args:
        name: The sample's name, e.g. ``"narrative"``.

    Raises:
        ParameterError: No sample of that name ships a question set.
    """
    entry = get_question_set(name)
    return load_question_set(entry.csv_path, entry.corpora_dir).with_method(HAND_WRITTEN)


def method_path(csv_path: str | Path) -> Path:
    """Where a saved set states how its questions were made: ``<csv stem>.method`` beside the CSV."""
    csv_path = Path(csv_path)
    return csv_path.with_name(csv_path.stem + ".method")


def load_question_set(csv_path: str | Path, corpora_dir: str | Path | None = None) -> QuestionSet:
    """Import a Chroma-format question set: the CSV and the folder of ``<corpus_id>.md``/``.txt`` files.

    Args:
        csv_path: The questions CSV.
        corpora_dir: The corpora folder; None: ``corpora/`` next to the CSV (where
            :func:`save_question_set` writes it).

    Raises:
        InputError: unreadable files, a missing corpus, malformed rows, mismatched offsets.
    """
    csv_path = Path(csv_path)
    corpora_dir = Path(corpora_dir) if corpora_dir is not None else csv_path.parent / "corpora"
    if not csv_path.is_file():
        raise InputError(f"{csv_path}: no such file")
    if not corpora_dir.is_dir():
        raise InputError(f"{corpora_dir}: no such folder (the corpora folder holds <corpus_id>.md files)")
    data = csv_path.read_bytes()
    if csv.field_size_limit() < _FIELD_LIMIT:
        csv.field_size_limit(_FIELD_LIMIT)
    # Read only the corpora the CSV names: a corpora folder may hold many more.
    try:
        head = csv.DictReader(io.StringIO(data.decode("utf-8-sig"), newline=""))
        wanted = list(dict.fromkeys((row.get("corpus_id") or "").strip() for row in head))
    except (UnicodeDecodeError, csv.Error):
        wanted = []  # parse_questions_csv reports it properly
    corpora: dict[str, str] = {}
    suffixes: dict[str, str] = {}
    for cid in wanted:
        path = _corpus_file(corpora_dir, cid) if cid else None
        if path is not None:
            corpora[cid] = read_corpus_text(path.read_bytes(), path.name)
            suffixes[cid] = path.suffix
    loaded = parse_questions_csv(data, corpora, name=csv_path.name, suffixes=suffixes)
    stated = method_path(csv_path)
    if stated.is_file():
        method = stated.read_text(encoding="utf-8", errors="replace").strip().splitlines()[:1]
        loaded = loaded.with_method(method[0][:200] if method else "")
    return loaded


def save_question_set(
    questions: QuestionSet, csv_path: str | Path, corpora_dir: str | Path | None = None
) -> list[Path]:
    """Export in the Chroma format: the CSV, and each corpus as ``<corpora_dir>/<corpus_id><suffix>``.

    Corpora are written byte for byte (UTF-8, ``\\n`` newlines), so the offsets stay valid;
    ``corpora_dir`` defaults to ``corpora/`` next to the CSV.

    Returns:
        The files written, the CSV first (then ``<csv stem>.method`` when the set states its method).

    Raises:
        ParameterError: a corpus id that is not a safe file name.
    """
    csv_path = Path(csv_path)
    corpora_dir = Path(corpora_dir) if corpora_dir is not None else csv_path.parent / "corpora"
    for cid in questions.corpora:
        if not _CORPUS_ID.match(cid):
            raise ParameterError(f"corpus id {cid!r} is not a file name ([A-Za-z0-9._-], at most 128)")
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    corpora_dir.mkdir(parents=True, exist_ok=True)
    csv_path.write_text(questions_to_csv(questions), encoding="utf-8", newline="")
    written = [csv_path]
    if questions.method:
        method_path(csv_path).write_text(questions.method + "\n", encoding="utf-8")
        written.append(method_path(csv_path))
    else:
        method_path(csv_path).unlink(missing_ok=True)  # an earlier set's statement would be false of this one
    for cid, text in questions.corpora.items():
        path = corpora_dir / corpus_file_name(questions, cid)
        path.write_text(text, encoding="utf-8", newline="")
        written.append(path)
    return written


def question_set_zip(questions: QuestionSet) -> bytes:
    """The set in the Chroma format as a zip: ``questions.csv`` and ``corpora/<corpus_id>.md|.txt``.

    The layout :func:`save_question_set` writes by default, in one download.
    """
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("questions.csv", questions_to_csv(questions))
        if questions.method:
            z.writestr("questions.method", questions.method + "\n")
        for cid, text in questions.corpora.items():
            z.writestr(f"corpora/{corpus_file_name(questions, cid)}", text)
    return buf.getvalue()
