"""A tuning run's output folder: its plan, its trials as they end, and its answer (written and read back).

A run writes three files beside its Optuna journal (``study.journal``), and the Tune page follows
a running job by reading them:

- ``plan.json``: what the run will do (families searched and left out with why, the split, the
  budget, the objective), written once at the start (and again when a resumed run plans anew);
- ``trials.jsonl``: one :meth:`~backend.tune.types.TrialRow.to_json` per line, appended as each
  trial ends (a run killed while writing leaves a partial last line: it is skipped);
- ``result.json``: the :class:`~backend.tune.types.TuneResult`, written at the end, also when cancelled.

``plan.json`` and ``result.json`` are written to a temporary file and renamed, so a reader never
sees half a file. The readers return None (or no trials) when a file is not there yet, and raise
one-line :class:`~backend.errors.InputError` when one is not what a run writes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from backend.errors import InputError
from backend.tune.types import TrialRow, TuneResult

__all__ = [
    "PLAN_FILE",
    "TRIALS_FILE",
    "RESULT_FILE",
    "JOURNAL_FILE",
    "read_plan",
    "read_trials",
    "read_result",
    "write_plan",
    "append_trial",
    "write_result",
]

PLAN_FILE = "plan.json"
TRIALS_FILE = "trials.jsonl"
RESULT_FILE = "result.json"
JOURNAL_FILE = "study.journal"


def _write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` through a temporary file and a rename (readers never see half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _read_json(path: Path) -> Any | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror or e})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not a tuning run's JSON ({e.msg} at line {e.lineno})") from None


def write_plan(out: str | os.PathLike[str], plan: Mapping[str, Any]) -> Path:
    """Write ``plan.json`` in ``out`` (made if missing); returns its path."""
    path = Path(out) / PLAN_FILE
    _write_json(path, dict(plan))
    return path


def read_plan(out: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The plan a run wrote in ``out`` (None: no plan yet).

    Raises:
        InputError: the file is not a JSON object.
    """
    path = Path(out) / PLAN_FILE
    raw = _read_json(path)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InputError(f"{path}: not a tuning run's plan (a JSON object)")
    return raw


def append_trial(out: str | os.PathLike[str], row: TrialRow) -> None:
    """Append ``row`` as one line of ``trials.jsonl`` in ``out``, flushed to disk (the page reads it live)."""
    path = Path(out) / TRIALS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(row.to_json(), ensure_ascii=False) + "\n"
    with path.open("a", encoding="utf-8") as f:
        # A line left partial by a kill would swallow this one: start on a fresh line.
        if f.tell() > 0 and not _ends_with_newline(path):
            f.write("\n")
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def read_trials(out: str | os.PathLike[str]) -> tuple[TrialRow, ...]:
    """The trials ``trials.jsonl`` in ``out`` holds, in the order written (none: no file yet).

    A line that does not parse is skipped: a run killed while appending leaves a partial last
    line. When a trial number appears twice (a resumed run re-ran a trial), the last line wins.

    Raises:
        InputError: the file cannot be read.
    """
    path = Path(out) / TRIALS_FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ()
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror or e})") from None
    rows: dict[int, TrialRow] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            row = TrialRow.from_json(json.loads(line))
        except (ValueError, KeyError, TypeError):  # a partial line, or one another version wrote
            continue
        rows.pop(row.number, None)
        rows[row.number] = row
    return tuple(sorted(rows.values(), key=lambda r: r.number))


def write_result(out: str | os.PathLike[str], result: TuneResult) -> Path:
    """Write ``result.json`` in ``out``; returns its path."""
    path = Path(out) / RESULT_FILE
    _write_json(path, result.to_json())
    return path


def read_result(out: str | os.PathLike[str]) -> TuneResult | None:
    """The result a finished (or cancelled) run wrote in ``out`` (None: not finished yet).

    Raises:
        InputError: the file is not a tuning result (one line naming it).
    """
    path = Path(out) / RESULT_FILE
    raw = _read_json(path)
    if raw is None:
        return None
    try:
        return TuneResult.from_json(raw)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InputError(f"{path}: not a tuning result ({type(e).__name__}: {e})") from None
