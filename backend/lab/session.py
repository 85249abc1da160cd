"""A session's settings: what a saved session writes of them and its question set, and what opening one gives back.

A session file keeps every page setting by section and name (``quality.K``, ``ppl.threshold``…,
as :mod:`backend.lab.settings` declares them) and the session's own question set under
``questions``. Both ways go through :func:`backend.lab.settings.checked_settings`, so a value
is written and read back only when its setting accepts it: a hand-edited file can give a
widget no value it would reject, and a file from an older Chunk Lab opens (θ saved as
``ppl.theta`` is read as ``ppl.threshold``; a setting this version does not know is skipped).
The file format itself (:mod:`backend.report.session`) is unchanged, so an older Chunk Lab opens
a newer file too, skipping the names it does not know.

A session file also keeps the pages' state (its ``state`` entry): the last benchmark — every
configuration's means and per-question results (:meth:`~backend.retrieval.evaluate.Benchmark.to_json`),
the letters it ran, the name of its question set and the set itself (a bundled sample's by
name) — and the Retrieval page's query, marks, picked sentences and which configurations are
picked. :func:`state_to_save` writes it (a benchmark over :data:`MAX_BENCHMARK_BYTES` is left
out, with a note); :func:`opened_state` reads it back, every value checked, before anything
changes. The state also keeps the session's last tuning result (``state.tuning``: the
:class:`~backend.tune.types.TuneResult`'s JSON, as ``result.json`` holds it), so the Tune page and
the Summary show it again. The Retrieval page's results are not stored: the page searches the saved query again
(chunk and query embeddings from the output cache, the chunks from the Chroma store).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

from backend.chunkers.context import ModelContext
from backend.chunkers.run import needs_model, run_chunker
from backend.errors import ChunkLabError, InputError, ParameterError, one_line
from backend.lab.settings import QUESTION_SOURCES, checked_settings
from backend.report.session import question_set_from_json, question_set_to_json
from backend.retrieval.evaluate import Benchmark
from backend.retrieval.jobs import BenchmarkRun
from backend.retrieval.questions import QuestionSet, load_sample_question_set
from backend.tune.types import TuneResult

__all__ = [
    "QUESTIONS",
    "MAX_BENCHMARK_BYTES",
    "OpenedSettings",
    "settings_to_save",
    "opened_settings",
    "model_spec",
    "SavedBenchmark",
    "RetrievalState",
    "OpenedState",
    "state_to_save",
    "opened_state",
    "benchmark_run",
]

QUESTIONS = "questions"  # the entry of a session's settings that holds its own question set
# A benchmark (results and question set) is saved up to this size; a larger one is left out of the file, with a note.
MAX_BENCHMARK_BYTES = 4 << 20
_MAX_QUERY_CHARS = 10_000
_MAX_MARKS = 10_000
_TAG = re.compile(r"^[A-Z]{1,3}$")
_SAMPLE = "sample:"


@dataclass(frozen=True)
class OpenedSettings:
    """What opening a session gives back of its settings.

    Attributes:
        values: The page settings it holds that this version accepts, by section and name
            (:func:`~backend.lab.settings.checked_settings`).
        questions: Its own question set when the file embeds it, else None.
        notes: What could not be restored, one line each (a question set too large to embed).
    """

    values: dict[str, dict[str, Any]]
    questions: QuestionSet | None
    notes: tuple[str, ...] = ()

    def get(self, section: str, name: str, default: Any = None) -> Any:
        """The session's ``section.name``, else ``default`` (the session did not hold a valid one)."""
        value = self.values.get(section, {}).get(name)
        return default if value is None else value

    @property
    def retrieve(self) -> int | None:
        """The benchmark's chunks per question as the session last ran it (-1: as many as hold excerpts)."""
        if self.get("benchmark", "auto"):
            return -1
        return self.get("benchmark", "retrieve")

    @property
    def sample_questions(self) -> str | None:
        """``sample:NAME`` when the session's benchmark used a bundled sample set, else None."""
        if self.get("benchmark", "source") == QUESTION_SOURCES[1] and self.get("benchmark", "sample"):
            return f"sample:{self.get('benchmark', 'sample')}"
        return None


def settings_to_save(values: Mapping[str, Mapping[str, Any]], questions: QuestionSet | None = None) -> dict[str, Any]:
    """A session file's ``settings``: the page settings a setting accepts, and the question set (when it has one).

    Args:
        values: ``{section: {name: value}}`` as the session holds them (``components.settings.capture``).
        questions: The session's own question set (embedded when small, else named by its hash).
    """
    out: dict[str, Any] = dict(checked_settings(values)[0])
    if questions is not None and len(questions):
        out[QUESTIONS] = question_set_to_json(questions)
    return out


def opened_settings(raw: Mapping[str, Any], source: str = "session") -> OpenedSettings:
    """The settings of a session file to put back (read before anything changes: a damaged set raises here).

    Args:
        raw: The file's ``settings`` object.
        source: What to call the file in messages.

    Raises:
        InputError: the embedded question set is damaged or does not match its hash.
    """
    values, _dropped = checked_settings(raw)  # a refused value is skipped, as a missing one
    ref = raw.get(QUESTIONS)
    questions = None
    notes: list[str] = []
    if isinstance(ref, Mapping):
        questions = question_set_from_json(ref, source)
        if questions is None:
            notes.append(
                f"the session's question set ({ref.get('count', '?')} questions, hash {ref.get('sha')}) "
                "was too large to embed: import it on the Benchmark page"
            )
    return OpenedSettings(values, questions, tuple(notes))


def model_spec(models: Mapping[str, Any], role: str) -> str | None:
    """The spec of the session's local model for ``role`` (``lm``, ``embedder``), or None for the default.

    A session saved by the app records ``{"kind": "local", "spec": …}`` for the language model and
    ``{"spec": …}`` for the embedder; a plain string is read as a spec too. A remote model has no
    spec (its key is never saved): None, the default, like a model the session did not choose.
    """
    value = models.get(role)
    if isinstance(value, str):
        return value or None
    if isinstance(value, Mapping) and value.get("kind", "local") == "local" and isinstance(value.get("spec"), str):
        return value["spec"] or None
    return None


# --- the pages' state ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SavedBenchmark:
    """A session's last benchmark, as the Benchmark page and the Summary show it.

    Attributes:
        benchmark: The results (every configuration's means and per-question results; no routing).
        tags: The letter of each result's configuration, in order.
        qset_name: How the run named its question set (``sample:narrative``, ``Import``…).
        qset: The question set it ran.
    """

    benchmark: Benchmark
    tags: tuple[str, ...]
    qset_name: str
    qset: QuestionSet


@dataclass(frozen=True)
class RetrievalState:
    """The Retrieval page's state a session keeps.

    Attributes:
        query: The query box.
        marks: The pasted excerpts' ranges in the document.
        picks: The picked sentences' indices.
        picked: The letters of the configurations picked; None: the page's default (every one).
        offered: The letters the page had offered (a configuration added later is picked when first offered).
        searched: Whether the page showed the results of a search for ``query`` (searched again on opening).
    """

    query: str = ""
    marks: tuple[tuple[int, int], ...] = ()
    picks: tuple[int, ...] = ()
    picked: tuple[str, ...] | None = None
    offered: tuple[str, ...] = ()
    searched: bool = False

    def to_json(self) -> dict[str, Any]:
        """The session file's ``state.retrieval`` object."""
        return {
            "query": self.query, "marks": [list(m) for m in self.marks], "picks": list(self.picks),
            "picked": None if self.picked is None else list(self.picked), "offered": list(self.offered),
            "searched": self.searched,
        }


@dataclass(frozen=True)
class OpenedState:
    """What opening a session gives back of the pages' state (each None when the file holds none)."""

    benchmark: SavedBenchmark | None = None
    retrieval: RetrievalState | None = None
    tuning: TuneResult | None = None


def state_to_save(
    benchmark: SavedBenchmark | None, retrieval: RetrievalState | None, limit: int = MAX_BENCHMARK_BYTES,
    tuning: TuneResult | None = None,
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A session file's ``state`` and one line for each part left out of it.

    Args:
        benchmark: The session's last finished benchmark, if any.
        retrieval: The Retrieval page's state, if the page was used.
        limit: The most bytes the benchmark (results and question set) may take, and the tuning result too.
        tuning: The session's last tuning result, if any.
    """
    state: dict[str, Any] = {}
    notes: list[str] = []
    if benchmark is not None:
        saved = _benchmark_to_json(benchmark)
        size = len(json.dumps(saved, ensure_ascii=False)) if saved is not None else 0
        if saved is None:
            notes.append(f"the benchmark's question set ({len(benchmark.qset)} questions) is too large to save with it")
        elif size > limit:
            notes.append(f"the benchmark ({size / 2**20:.1f} MB) is over the {limit / 2**20:.0f} MB a session file holds")
        else:
            state["benchmark"] = saved
    if retrieval is not None:
        state["retrieval"] = retrieval.to_json()
    if tuning is not None:
        raw = tuning.to_json()
        size = len(json.dumps(raw, ensure_ascii=False))
        if size > limit:
            notes.append(f"the tuning result ({size / 2**20:.1f} MB) is over the {limit / 2**20:.0f} MB a session "
                         "file holds")
        else:
            state["tuning"] = raw
    return state, tuple(notes)


def _benchmark_to_json(saved: SavedBenchmark) -> dict[str, Any] | None:
    """The ``state.benchmark`` object (None: its question set is too large to embed)."""
    name = saved.qset_name
    if name.startswith(_SAMPLE) and _bundled_set(name[len(_SAMPLE):]) == saved.qset:
        questions: dict[str, Any] = {"sample": name[len(_SAMPLE):]}
    else:
        questions = question_set_to_json(saved.qset)
        if "csv" not in questions:
            return None
    return {
        "tags": list(saved.tags), "qset_name": name, "questions": questions,
        "results": saved.benchmark.to_json(per_question=True),
    }


def _bundled_set(name: str) -> QuestionSet | None:
    try:
        return load_sample_question_set(name)
    except ChunkLabError:
        return None


def opened_state(raw: Any, text_length: int, source: str = "session") -> OpenedState:
    """The pages' state a session file holds, every value checked (read before anything changes).

    Args:
        raw: The file's ``state`` object.
        text_length: The session's document's length (the marks must lie inside it).
        source: What to call the file in messages.

    Raises:
        InputError: a damaged benchmark, Retrieval state or tuning result (one line, naming ``source``).
    """
    if not isinstance(raw, Mapping):
        raise InputError(f"{source}: the saved pages' state is damaged")
    benchmark = _opened_benchmark(raw["benchmark"], source) if raw.get("benchmark") is not None else None
    retrieval = _opened_retrieval(raw["retrieval"], text_length, source) if raw.get("retrieval") is not None else None
    tuning = _opened_tuning(raw["tuning"], source) if raw.get("tuning") is not None else None
    return OpenedState(benchmark, retrieval, tuning)


def _opened_tuning(raw: Any, source: str) -> TuneResult:
    if not isinstance(raw, Mapping):
        raise InputError(f"{source}: the saved tuning result is damaged")
    try:
        return TuneResult.from_json(raw)
    except (KeyError, TypeError, ValueError, AttributeError, ChunkLabError) as e:
        raise InputError(one_line(f"{source}: the saved tuning result is damaged ({type(e).__name__}: {e})")) from None


def _tags(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(t, str) and _TAG.match(t) for t in value):
        raise InputError(f"{what}: the configuration letters are not valid")
    return tuple(value)


def _opened_benchmark(raw: Any, source: str) -> SavedBenchmark:
    what = f"{source}: the saved benchmark"
    if not isinstance(raw, Mapping):
        raise InputError(f"{what} is damaged")
    benchmark = Benchmark.from_json(raw.get("results"), source)
    tags = _tags(raw.get("tags"), what)
    name, ref = raw.get("qset_name"), raw.get("questions")
    if len(tags) != len(benchmark.results) or not isinstance(name, str) or not isinstance(ref, Mapping):
        raise InputError(f"{what} is damaged (letters, question set)")
    if isinstance(ref.get("sample"), str):
        try:
            qset = load_sample_question_set(ref["sample"])
        except ParameterError as e:
            raise InputError(one_line(f"{what}: {e}")) from e
    else:
        qset = question_set_from_json(ref, source)
        if qset is None:
            raise InputError(f"{what} has no question set")
    asked = [(q.corpus_id, q.question) for q in qset.questions]
    for result in benchmark.results:
        if result.questions and [(q.corpus_id, q.question) for q in result.questions] != asked:
            raise InputError(f"{what} does not match its question set")
    return SavedBenchmark(benchmark, tags, name[:200], qset)


def _opened_retrieval(raw: Any, text_length: int, source: str) -> RetrievalState:
    what = f"{source}: the saved Retrieval page"
    if not isinstance(raw, Mapping):
        raise InputError(f"{what} is damaged")
    query, marks, picks = raw.get("query", ""), raw.get("marks", []), raw.get("picks", [])
    if not isinstance(query, str) or len(query) > _MAX_QUERY_CHARS:
        raise InputError(f"{what}: the query is not valid")
    if not isinstance(marks, list) or len(marks) > _MAX_MARKS or not all(
        isinstance(m, list) and len(m) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in m)
        and 0 <= m[0] < m[1] <= text_length for m in marks
    ):
        raise InputError(f"{what}: the marks are not ranges of the document")
    if not isinstance(picks, list) or len(picks) > _MAX_MARKS or not all(
        isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in picks
    ):
        raise InputError(f"{what}: the picked sentences are not valid")
    picked = raw.get("picked")
    return RetrievalState(
        query, tuple((a, b) for a, b in marks), tuple(picks),
        None if picked is None else _tags(picked, what), _tags(raw.get("offered", []), what),
        bool(raw.get("searched", False)),
    )


def benchmark_run(saved: SavedBenchmark, context: ModelContext | None) -> BenchmarkRun:
    """The saved benchmark as the Benchmark page keeps a finished one: with its chunkings, for the agreement maps.

    The chunkings are cut again, with no model run: a model-backed configuration only from the
    output cache (``context``: the session's cache-only one; None: none). A corpus with a
    configuration that cannot be chunked that way keeps no chunkings (its agreement maps are not drawn).
    """
    configs = [r.config for r in saved.benchmark.results]
    chunkings: dict[str, tuple[Any, ...]] = {}
    for cid in saved.benchmark.corpora:
        if cid not in saved.qset.corpora or (context is None and any(needs_model(c) for c in configs)):
            continue
        try:
            chunkings[cid] = tuple(run_chunker(saved.qset.document(cid), c, context) for c in configs)
        except ChunkLabError:
            continue
    return BenchmarkRun(saved.benchmark, chunkings)

