"""The documents of a corpus: every file of a folder (recursively) or of a zip that the loaders read.

A file the loaders cannot read by its extension is listed in :attr:`CorpusInputs.skipped` with its
one-line reason; one that fails to load is found by the document's work
(:func:`backend.corpus.work.document_rows`) and skipped there. Neither stops a run.

A zip is extracted once into ``extract_to`` (members are checked: no absolute paths, no ``..``, no
links, a bound on the total size), so a resumed run reads the same files.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from backend.errors import InputError
from backend.loaders import SUPPORTED_EXTENSIONS

__all__ = ["CorpusFile", "CorpusInputs", "Skipped", "corpus_inputs", "MAX_ZIP_BYTES"]

MAX_ZIP_BYTES = 4 << 30  # what a zip may unpack to
_IGNORED_DIRS = ("__MACOSX",)


@dataclass(frozen=True)
class CorpusFile:
    """One document of a corpus.

    Attributes:
        name: Its path relative to the corpus root, with ``/`` (what rows and pages name it by).
        path: Where it is read from.
    """

    name: str
    path: Path


@dataclass(frozen=True)
class Skipped:
    """A file of the corpus that gives no rows, and why (one line)."""

    name: str
    reason: str

    def to_json(self) -> dict[str, str]:
        """``{"doc", "error"}`` (a line of ``skipped.jsonl``)."""
        return {"doc": self.name, "error": self.reason}


@dataclass(frozen=True)
class CorpusInputs:
    """The documents of a corpus, in name order, and the files skipped by their extension.

    Attributes:
        root: The folder the names are relative to (a zip's extraction folder).
        files: The documents to run.
        skipped: Files no loader reads.
        source: The path the user gave (the folder or the zip).
    """

    root: Path
    files: tuple[CorpusFile, ...]
    skipped: tuple[Skipped, ...]
    source: str


def _hidden(rel: PurePosixPath) -> bool:
    return any(part.startswith(".") or part in _IGNORED_DIRS for part in rel.parts)


def _extract(zip_path: Path, target: Path) -> None:
    """Extract ``zip_path`` into ``target`` once (a ``.done`` marker says it is complete), checking every member."""
    marker = target / ".done"
    if marker.exists():
        return
    try:
        with zipfile.ZipFile(zip_path) as zf:
            members = zf.infolist()
            total = sum(m.file_size for m in members)
            if total > MAX_ZIP_BYTES:
                raise InputError(f"{zip_path.name}: unpacks to {total / 2**30:.1f} GiB, over the "
                                 f"{MAX_ZIP_BYTES / 2**30:.0f} GiB bound")
            if target.exists():
                shutil.rmtree(target)  # a partial extraction from a killed run
            target.mkdir(parents=True)
            for m in members:
                rel = PurePosixPath(m.filename)
                if rel.is_absolute() or ".." in rel.parts or (m.external_attr >> 16) & 0o170000 == 0o120000:
                    raise InputError(f"{zip_path.name}: member {m.filename[:80]!r} would be written outside the folder")
                if m.is_dir() or _hidden(rel):
                    continue
                dest = target.joinpath(*rel.parts)
                dest.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(m) as src, open(dest, "wb") as out:
                    shutil.copyfileobj(src, out)
    except zipfile.BadZipFile as e:
        raise InputError(f"{zip_path.name}: not a readable zip ({e})") from None
    except OSError as e:
        raise InputError(f"{zip_path.name}: cannot be extracted ({e.strerror or e})") from None
    marker.touch()


def corpus_inputs(path: str | os.PathLike[str], *, extract_to: Path | None = None) -> CorpusInputs:
    """The documents under ``path`` (a folder, or a ``.zip`` extracted into ``extract_to``).

    Raises:
        InputError: ``path`` is missing, is neither a folder nor a zip, or holds no file at all.
    """
    src = Path(path).expanduser()
    if not src.exists():
        raise InputError(f"{path}: no such folder or zip")
    if src.is_file():
        if not zipfile.is_zipfile(src):
            raise InputError(f"{path}: neither a folder nor a zip of documents")
        if extract_to is None:
            raise InputError(f"{path}: a zip needs a folder to be extracted into")
        _extract(src, extract_to)
        root = extract_to
    else:
        root = src
    files: list[CorpusFile] = []
    skipped: list[Skipped] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _IGNORED_DIRS)
        for fn in sorted(filenames):
            if fn.startswith("."):
                continue
            full = Path(dirpath) / fn
            name = full.relative_to(root).as_posix()
            suffix = full.suffix.lower()
            if suffix not in SUPPORTED_EXTENSIONS:
                what = f"'{suffix}'" if suffix else "no extension"
                skipped.append(Skipped(name, f"unsupported format ({what}; readable: {', '.join(SUPPORTED_EXTENSIONS)})"))
            else:
                files.append(CorpusFile(name, full))
    files.sort(key=lambda f: f.name)
    skipped.sort(key=lambda s: s.name)
    if not files and not skipped:
        raise InputError(f"{path}: holds no file")
    return CorpusInputs(root=root, files=tuple(files), skipped=tuple(skipped), source=str(path))
