"""The output folder of a corpus run, written one document at a time and read back to resume.

Files (all UTF-8):

- ``run.json``: the spec (:meth:`~backend.corpus.spec.CorpusSpec.to_json`), its digest, the corpus
  path and the engine of the last run. A run into a folder whose digest differs is refused.
- ``results.jsonl``: one row per document and configuration (:func:`backend.corpus.work.document_rows`).
  A document's rows are appended in one write, flushed and fsynced before the next document is
  reported, so a killed run loses at most the documents in flight. A last line cut short by a
  kill is dropped (and cut from the file) when the folder is opened again.
- ``skipped.jsonl``: ``{"doc", "error"}`` per file that gave no rows.

A resumed run skips every (document, configuration) already in ``results.jsonl``: it recomputes
nothing, and a configuration added to the command runs on the documents it is missing from.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.corpus.inputs import Skipped
from backend.corpus.spec import CorpusSpec
from backend.errors import InputError, ParameterError

__all__ = ["CorpusResults", "ResultsWriter", "read_results", "read_run", "RESULTS", "SKIPPED", "RUN"]

RUN = "run.json"
RESULTS = "results.jsonl"
SKIPPED = "skipped.jsonl"


@dataclass(frozen=True)
class CorpusResults:
    """What an output folder holds.

    Attributes:
        run: ``run.json`` (empty when absent).
        rows: The rows, in the order written (the last row of a (document, configuration) wins).
        skipped: ``{"doc", "error"}`` per skipped file (the last reason per file).
    """

    run: Mapping[str, Any]
    rows: tuple[dict[str, Any], ...]
    skipped: tuple[dict[str, str], ...]

    def done(self) -> set[tuple[str, str]]:
        """The (document, configuration spec) pairs with a row (errors included: they are not retried)."""
        return {(r["doc"], r["config"]) for r in self.rows}


def _read_jsonl(path: Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """The objects of a JSONL file; a last line cut short (no newline, or not JSON) is dropped (and cut with ``repair``)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror or e})") from None
    out: list[dict[str, Any]] = []
    good_end = 0
    pos = 0
    for line in data.splitlines(keepends=True):
        pos += len(line)
        if not line.endswith(b"\n"):
            break  # a write cut short by a kill
        try:
            obj = json.loads(line)
        except ValueError:
            if pos == len(data):
                break
            raise InputError(f"{path}: line {len(out) + 1} is not JSON; the folder was not written by a corpus run") from None
        if isinstance(obj, dict):
            out.append(obj)
        good_end = pos
    if repair and good_end < len(data):
        with open(path, "r+b") as f:
            f.truncate(good_end)
    return out


def read_run(out: str | os.PathLike[str]) -> dict[str, Any]:
    """The folder's ``run.json`` ({} when there is none yet).

    Raises:
        InputError: it is unreadable or not JSON.
    """
    path = Path(out) / RUN
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a corpus run's ({e})") from None


def read_results(out: str | os.PathLike[str]) -> CorpusResults:
    """Read an output folder (a missing one reads as empty).

    Raises:
        InputError: a file is unreadable or not a corpus run's.
    """
    folder = Path(out)
    run = read_run(folder)
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for r in _read_jsonl(folder / RESULTS):
        if "doc" in r and "config" in r:
            latest.pop((r["doc"], r["config"]), None)
            latest[(r["doc"], r["config"])] = r
    skipped: dict[str, dict[str, str]] = {}
    for s in _read_jsonl(folder / SKIPPED):
        if "doc" in s:
            skipped[s["doc"]] = s
    return CorpusResults(run=run, rows=tuple(latest.values()), skipped=tuple(skipped.values()))


class ResultsWriter:
    """Appends a run's rows and skipped files to its output folder (one writer per folder: the driver).

    Args:
        out: The output folder (created).
        spec: The run's spec; a folder holding a run with another digest is refused.
        source: The corpus path, recorded in ``run.json``.
        engine: The engine's name, recorded in ``run.json``.

    Raises:
        ParameterError: the folder holds a run with other settings.
        InputError: the folder cannot be written.
    """

    def __init__(self, out: str | os.PathLike[str], spec: CorpusSpec, *, source: str, engine: str) -> None:
        self.folder = Path(out)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"{out}: cannot be created ({e.strerror or e})") from None
        _read_jsonl(self.folder / RESULTS, repair=True)  # a last line cut by a kill goes before anything is read
        _read_jsonl(self.folder / SKIPPED, repair=True)
        self.existing = read_results(self.folder)
        if self.existing.run and self.existing.run.get("digest") != spec.digest():
            raise ParameterError(
                f"{out} holds a corpus run with other settings (metrics, budget, question set or models); "
                "use another --out, or the same settings to resume it")
        configs = {c["spec"]: c for c in self.existing.run.get("configs", [])}
        configs.update({c["spec"]: c for c in spec.to_json()["configs"]})
        run = spec.to_json() | {"configs": list(configs.values()), "digest": spec.digest(), "source": source,
                                "engine": engine}
        self._write_atomic(self.folder / RUN, json.dumps(run, ensure_ascii=False, indent=2) + "\n")

    def _write_atomic(self, path: Path, text: str) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        except OSError as e:
            raise InputError(f"{path}: cannot be written ({e.strerror or e})") from None

    def _append(self, name: str, objs: Iterable[Mapping[str, Any]]) -> None:
        data = "".join(json.dumps(o, ensure_ascii=False, allow_nan=False) + "\n" for o in objs)
        if not data:
            return
        try:
            with open(self.folder / name, "a", encoding="utf-8") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise InputError(f"{self.folder / name}: cannot be written ({e.strerror or e})") from None

    def rows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Append one document's rows (one write, flushed and synced)."""
        self._append(RESULTS, rows)

    def skipped(self, items: Iterable[Skipped]) -> None:
        """Append skipped files."""
        self._append(SKIPPED, (s.to_json() for s in items))
