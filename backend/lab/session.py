"""A session's settings: what a saved session writes of them and its question set, and what opening one gives back.

A session file keeps every page setting by section and name (``quality.K``, ``ppl.threshold``…,
as :mod:`backend.lab.settings` declares them) and the session's own question set under
``questions``. Both ways go through :func:`backend.lab.settings.checked_settings`, so a value
is written and read back only when its setting accepts it: a hand-edited file can give a
widget no value it would reject, and a file from an older Chunk Lab opens (θ saved as
``ppl.theta`` is read as ``ppl.threshold``; a setting this version does not know is skipped).
The file format itself (:mod:`backend.report.session`) is unchanged, so an older Chunk Lab opens
a newer file too, skipping the names it does not know.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from backend.lab.settings import QUESTION_SOURCES, checked_settings
from backend.report.session import question_set_from_json, question_set_to_json
from backend.retrieval.questions import QuestionSet

__all__ = ["QUESTIONS", "OpenedSettings", "settings_to_save", "opened_settings", "model_spec"]

QUESTIONS = "questions"  # the entry of a session's settings that holds its own question set


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
