"""Saved sessions: the document, the configurations and the settings a comparison needs, as one small JSON.

A session names its document by hash (a bundled sample also by name, so it reopens with no
upload), lists the configurations with their letters and full parameters, the models by
spec or name and the pages' thresholds and view settings, and the pages' state
(``state``: the last benchmark's results, the Retrieval page's query, marks and selection;
written and checked by :mod:`backend.lab.session`; a file without it — an older one — opens
as before, and an older Chunk Lab skips it). It never holds document text, and
never an API key: :func:`session_to_json` drops every entry whose name looks like a secret,
whatever the caller put there. A session file is untrusted: a model it names by path must lie
inside the data directory (or be the one ``CHUNKLAB_LM``/``CHUNKLAB_EMBEDDER`` names), so
opening a file never makes the app read a folder elsewhere on the server. Reading one
(:func:`parse_session`) validates everything — a file from a newer Chunk Lab, damaged JSON,
an unknown chunker or a bad parameter is an :class:`~backend.errors.InputError` in one line —
so the app can refuse it and keep the session it has.

Configurations also travel in a URL's query string (:func:`configs_to_query`), e.g.
``recursive:chunk_size=300;fixed_token:chunk_size=250,chunk_overlap=125``: only the
parameters that differ from the chunker's default are written, each value percent-encoded,
and an entry whose letter is not its position's (A, B, C…) starts with ``LETTER.``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import quote, unquote

from backend.chunkers import REGISTRY, make_chunker
from backend.chunking import ChunkerConfig, tag_for
from backend.config import data_dir, default_embedder_spec, default_lm_spec
from backend.errors import ChunkLabError, InputError, ParameterError, one_line
from backend.retrieval.questions import parse_questions_csv, questions_to_csv
from backend.samples import load_sample
from backend.text.document import Document

__all__ = [
    "FORMAT_VERSION",
    "FORMAT_NAME",
    "MAX_EMBEDDED_QUESTIONS_BYTES",
    "DocRef",
    "Session",
    "session_to_json",
    "parse_session",
    "save_session",
    "load_session",
    "configs_to_query",
    "configs_from_query",
    "resolve_document",
    "sessions_dir",
    "session_path",
    "question_set_to_json",
    "question_set_from_json",
    "question_set_hash",
]

FORMAT_VERSION = 1
FORMAT_NAME = "chunklab-session"
# A session's own question set is embedded up to this size (CSV and corpora); larger ones are named by hash only.
MAX_EMBEDDED_QUESTIONS_BYTES = 1 << 20
_MAX_SESSION_BYTES = 16 << 20

# Names of entries that may hold a credential: never written, never read back.
_SECRET = re.compile(
    r"(api_?key|secret|password|passwd|authorization|bearer|credential|(^|[_-])key$|(^|[_-])(access_|auth_)?token$)",
    re.IGNORECASE,
)
_TAG = re.compile(r"^[A-Z]{1,3}$")
_SHA = re.compile(r"^[0-9a-f]{16}$")
_SESSION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True)
class DocRef:
    """Which document a session was made on.

    Attributes:
        sample: The bundled sample's name, or None for an uploaded file.
        name: The document's file name (``Document.source``).
        sha: ``Document.id``: the hash of its normalized text.
    """

    sample: str | None
    name: str
    sha: str

    @classmethod
    def of(cls, doc: Document, sample: str | None = None) -> DocRef:
        """The reference to ``doc`` (``sample``: the bundled sample it is, if any)."""
        return cls(sample=sample, name=doc.source, sha=doc.id)


@dataclass(frozen=True)
class Session:
    """Everything needed to reopen a comparison.

    Attributes:
        version: The format version (:data:`FORMAT_VERSION` when written by this code).
        doc: The document.
        configs: ``(letter, configuration)`` in the Compare page's order.
        models: Model specs or names (``lm``, ``embedder``, ``chat``); never a key.
        settings: Thresholds, modes, the question-set reference and view settings, JSON values.
        created: When it was saved (ISO 8601, UTC).
        state: The pages' state by page (``benchmark``, ``retrieval``), JSON values
            (:func:`backend.lab.session.state_to_save`); empty in an older file.
    """

    version: int
    doc: DocRef
    configs: tuple[tuple[str, ChunkerConfig], ...]
    models: Mapping[str, Any] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    created: str = ""
    state: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def make(
        cls,
        doc: DocRef,
        configs: Sequence[tuple[str, ChunkerConfig]],
        models: Mapping[str, Any] | None = None,
        settings: Mapping[str, Any] | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> Session:
        """A session of the current format, stamped now."""
        created = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
        return cls(FORMAT_VERSION, doc, tuple(configs), dict(models or {}), dict(settings or {}), created, dict(state or {}))



# --- JSON ----------------------------------------------------------------------------------------


def _scrub(value: Any) -> Any:
    """``value`` with every mapping entry whose name looks like a credential removed (recursively)."""
    if isinstance(value, Mapping):
        return {str(k): _scrub(v) for k, v in value.items() if not _SECRET.search(str(k))}
    if isinstance(value, (list, tuple)):
        return [_scrub(v) for v in value]
    return value


def session_to_json(session: Session) -> str:
    """The session as JSON text (indented, keys in a fixed order), with no credential in it.

    Raises:
        ParameterError: a model or setting value that is not JSON (a bug in the caller).
    """
    payload = {
        "format": FORMAT_NAME,
        "version": session.version,
        "created": session.created,
        "document": {"sample": session.doc.sample, "name": session.doc.name, "sha": session.doc.sha},
        "configs": [
            {"tag": tag, "chunker": c.name, "params": c.params_dict, "tokenizer": c.tokenizer}
            for tag, c in session.configs
        ],
        "models": _scrub(session.models),
        "settings": _scrub(session.settings),
    }
    if session.state:
        payload["state"] = _scrub(session.state)
    try:
        return json.dumps(payload, ensure_ascii=False, indent=2, allow_nan=False) + "\n"
    except (TypeError, ValueError) as e:
        raise ParameterError(f"session: a setting cannot be saved ({e})") from e


def _need(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise InputError(f"{where}: '{key}' is missing or not valid")
    return value


def parse_session(text: str | bytes, source: str = "session") -> Session:
    """Read and validate a session file's text.

    Args:
        text: The JSON (bytes are read as UTF-8).
        source: What to call it in messages (the file name).

    Raises:
        InputError: not a Chunk Lab session, damaged, from a newer format, or naming an unknown
            chunker, a bad parameter or a bad letter (one line, naming ``source``).
    """
    if isinstance(text, bytes):
        if len(text) > _MAX_SESSION_BYTES:
            raise InputError(f"{source}: too large for a session file ({len(text):,} bytes)")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{source}: not a Chunk Lab session file (not UTF-8 text)") from e
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{source}: damaged session file (invalid JSON at line {e.lineno}, column {e.colno})") from e
    if not isinstance(raw, dict) or raw.get("format") != FORMAT_NAME:
        raise InputError(f"{source}: not a Chunk Lab session file")
    version = raw.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InputError(f"{source}: damaged session file (no valid format version)")
    if version > FORMAT_VERSION:
        raise InputError(
            f"{source}: saved by a newer Chunk Lab (session format {version}; this version reads up to {FORMAT_VERSION})"
        )
    doc_raw = _need(raw, "document", dict, source)
    sample = doc_raw.get("sample")
    if sample is not None and not isinstance(sample, str):
        raise InputError(f"{source}: the document's 'sample' is not valid")
    name = _need(doc_raw, "name", str, f"{source}: document")
    sha = _need(doc_raw, "sha", str, f"{source}: document")
    if not _SHA.match(sha):
        raise InputError(f"{source}: the document's hash {sha[:40]!r} is not valid")
    configs_raw = _need(raw, "configs", list, source)
    configs: list[tuple[str, ChunkerConfig]] = []
    for i, item in enumerate(configs_raw, 1):
        where = f"{source}: configuration {i}"
        if not isinstance(item, dict):
            raise InputError(f"{where} is not valid")
        tag = _need(item, "tag", str, where)
        if not _TAG.match(tag) or any(t == tag for t, _ in configs):
            raise InputError(f"{where}: letter {tag[:10]!r} is not valid or is used twice")
        chunker = _need(item, "chunker", str, where)
        params = item.get("params", {})
        tokenizer = item.get("tokenizer", "cl100k")
        if not isinstance(params, dict) or not isinstance(tokenizer, str):
            raise InputError(f"{where}: parameters are not valid")
        try:
            config = make_chunker(chunker, params, tokenizer).config
        except ChunkLabError as e:
            raise InputError(one_line(f"{where} ({tag}): {e}")) from e
        configs.append((tag, config))
    models = raw.get("models", {})
    settings = raw.get("settings", {})
    state = raw.get("state", {})
    if not isinstance(models, dict) or not isinstance(settings, dict) or not isinstance(state, dict):
        raise InputError(f"{source}: damaged session file ('models', 'settings' and 'state' must be objects)")
    for role, model in models.items():
        if isinstance(model, dict) and isinstance(model.get("spec"), str):
            _check_model_spec(model["spec"], str(role), source)
    created = raw.get("created", "")
    return Session(
        version=version,
        doc=DocRef(sample=sample, name=name, sha=sha),
        configs=tuple(configs),
        models=_scrub(models),
        settings=_scrub(settings),
        created=created if isinstance(created, str) else "",
        state=_scrub(state),
    )


def _looks_like_path(spec: str) -> bool:
    """Whether a model spec names a file or folder rather than a bundled model or a hub id (``org/name``)."""
    return (
        spec.startswith((".", "/", "~", "\\"))
        or "\\" in spec
        or ".." in spec
        or spec.count("/") > 1
        or spec.lower().endswith(".gguf")
        or Path(spec).is_absolute()
        or Path(spec).expanduser().exists()
    )


def _check_model_spec(spec: str, role: str, source: str) -> None:
    """Refuse a model path outside the data directory (the configured default models excepted)."""
    spec = spec.strip()
    if not spec or not _looks_like_path(spec) or spec in (default_lm_spec(), default_embedder_spec()):
        return
    root = data_dir().expanduser().resolve()
    path = Path(spec).expanduser().resolve()
    if not path.is_relative_to(root):
        raise InputError(
            f"{source}: the {role[:20]} model {spec[:80]!r} is a path outside the data directory ({root}); "
            "a session may name a bundled model, a hub id or a model inside the data directory"
        )


def save_session(session: Session, path: str | Path) -> Path:
    """Write ``session`` to ``path`` (its folder is created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(session_to_json(session), encoding="utf-8")
    return path


def load_session(path: str | Path) -> Session:
    """Read and validate the session file at ``path``.

    Raises:
        InputError: the file cannot be read, or is not a valid session (see :func:`parse_session`).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as e:
        raise InputError(f"{path.name}: no such session file") from e
    except OSError as e:
        raise InputError(one_line(f"{path.name}: cannot be read ({e.strerror or e})")) from e
    return parse_session(data, source=path.name)


# --- the URL form ----------------------------------------------------------------------------------


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return quote(str(value), safe="._-")


def configs_to_query(configs: Sequence[tuple[str, ChunkerConfig]]) -> str:
    """The configurations as one URL-safe query value (see the module docstring).

    Only parameters that differ from the chunker's default are written; a tokenizer other
    than ``cl100k`` is written as ``tokenizer=NAME``.
    """
    parts = []
    for i, (tag, config) in enumerate(configs):
        defaults = {p.name: p.default for p in REGISTRY[config.name].params} if config.name in REGISTRY else {}
        pairs = [f"{k}={_format_value(v)}" for k, v in config.params if k not in defaults or defaults[k] != v]
        if config.tokenizer != "cl100k":
            pairs.append(f"tokenizer={_format_value(config.tokenizer)}")
        head = config.name if tag == tag_for(i) else f"{tag}.{config.name}"
        parts.append(f"{head}:{','.join(pairs)}" if pairs else head)
    return ";".join(parts)


def configs_from_query(value: str) -> list[tuple[str, ChunkerConfig]]:
    """The configurations a :func:`configs_to_query` value describes, with defaults filled in.

    Raises:
        ParameterError: an empty or malformed value, an unknown chunker, a bad parameter or a
            letter used twice (one line, naming the entry).
    """
    out: list[tuple[str, ChunkerConfig]] = []
    entries = [e for e in value.strip().split(";") if e.strip()]
    if not entries:
        raise ParameterError("configs: no configuration in the link")
    for i, entry in enumerate(entries):
        head, _, body = entry.strip().partition(":")
        tag, dot, name = head.partition(".")
        if not dot:
            tag, name = tag_for(i), head
        if not _TAG.match(tag) or any(t == tag for t, _ in out):
            raise ParameterError(f"configs: entry {i + 1} has a bad or repeated letter {tag[:10]!r}")
        params: dict[str, str] = {}
        for pair in filter(None, body.split(",")):
            key, eq, raw = pair.partition("=")
            if not eq or not key:
                raise ParameterError(f"configs: {name}: {pair[:40]!r} must look like key=value")
            params[key] = unquote(raw)
        tokenizer = params.pop("tokenizer", "cl100k")
        try:
            config = make_chunker(name, params, tokenizer).config
        except ChunkLabError as e:
            raise ParameterError(one_line(f"configs: {e}")) from e
        out.append((tag, config))
    return out


# --- the document ------------------------------------------------------------------------------------


def resolve_document(ref: DocRef, candidate: Document | None = None) -> Document:
    """The session's document: its bundled sample, or ``candidate`` once its hash matches.

    Args:
        ref: The session's document reference.
        candidate: The document the user gave for a session on an uploaded file (ignored for a sample).

    Raises:
        InputError: the sample is unknown or its text changed, no document was given, or the
            given one has another hash.
    """
    if ref.sample is not None:
        try:
            doc = load_sample(ref.sample)
        except ParameterError as e:
            raise InputError(one_line(f"session: {e}")) from e
        if doc.id != ref.sha:
            raise InputError(f"the bundled sample '{ref.sample}' has changed since the session was saved (hash {ref.sha})")
        return doc
    if candidate is None:
        raise InputError(f"the session's document is needed: {ref.name} (hash {ref.sha})")
    if candidate.id != ref.sha:
        raise InputError(f"this file is not the session's document (hash {candidate.id}, expected {ref.sha} of {ref.name})")
    return candidate


# --- where sessions are kept ----------------------------------------------------------------------------


def sessions_dir() -> Path:
    """The folder ``?session=NAME`` reads from: ``<data dir>/sessions``."""
    return data_dir() / "sessions"


def session_path(name: str) -> Path:
    """The file a ``?session=`` value names, inside :func:`sessions_dir` (``.json`` added when missing).

    Raises:
        ParameterError: a name with a folder, ``..``, an absolute path, odd characters, or a
            link that leads out of the sessions folder.
    """
    name = name.strip()
    if not _SESSION_NAME.match(name) or ".." in name:
        raise ParameterError(
            f"session {name[:60]!r}: a session name is a file name in the sessions folder "
            "(letters, digits, '.', '_', '-'; no folders)"
        )
    if not name.endswith(".json"):
        name += ".json"
    root = sessions_dir().resolve()
    path = (root / name).resolve()
    if path.parent != root:
        raise ParameterError(f"session {name!r}: leads outside the sessions folder")
    return path


# --- the session's question set ------------------------------------------------------------------------


def question_set_hash(questions: Any) -> str:
    """A 16-hex-digit hash of a question set's CSV and corpora (names the set in a session)."""
    h = hashlib.sha256(questions_to_csv(questions).encode("utf-8"))
    for cid in sorted(questions.corpora):
        h.update(b"\0" + cid.encode("utf-8") + b"\0" + questions.corpora[cid].encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:16]


def question_set_to_json(questions: Any, limit: int = MAX_EMBEDDED_QUESTIONS_BYTES) -> dict[str, Any]:
    """A session's reference to its own question set: its hash, and the set itself when under ``limit`` bytes."""
    csv_text = questions_to_csv(questions)
    corpora = {cid: questions.corpora[cid] for cid in questions.corpus_ids}
    out: dict[str, Any] = {"sha": question_set_hash(questions), "count": len(questions)}
    if questions.method:
        out["method"] = questions.method
    if len(csv_text) + sum(len(t) for t in corpora.values()) <= limit:
        out["csv"] = csv_text
        out["corpora"] = corpora
        out["suffixes"] = {cid: questions.suffixes[cid] for cid in corpora if cid in questions.suffixes}
    return out


def question_set_from_json(ref: Mapping[str, Any], source: str = "session") -> Any | None:
    """The question set a session embeds (None when it names one by hash only).

    Raises:
        InputError: the embedded set is damaged or does not match its hash.
    """
    if "csv" not in ref:
        return None
    csv_text, corpora, suffixes = ref.get("csv"), ref.get("corpora"), ref.get("suffixes", {})
    if not isinstance(csv_text, str) or not isinstance(corpora, dict) or not isinstance(suffixes, dict):
        raise InputError(f"{source}: the embedded question set is damaged")
    if not all(isinstance(v, str) for v in (*corpora.values(), *suffixes.values())):
        raise InputError(f"{source}: the embedded question set is damaged")
    questions = parse_questions_csv(csv_text, corpora, name=f"{source}: questions", suffixes=suffixes)
    if ref.get("sha") != question_set_hash(questions):
        raise InputError(f"{source}: the embedded question set does not match its hash")
    method = ref.get("method", "")
    return questions.with_method(method[:200]) if isinstance(method, str) else questions
