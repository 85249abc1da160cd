"""Settings read from environment variables, with their defaults.

Every variable here is listed in the README.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["max_file_bytes", "data_dir", "DEFAULT_MAX_FILE_MB"]

DEFAULT_MAX_FILE_MB = 50.0


def max_file_bytes() -> int:
    """The upload size limit in bytes (``CHUNKLAB_MAX_FILE_MB``, default 50 MB)."""
    raw = os.environ.get("CHUNKLAB_MAX_FILE_MB", "")
    try:
        mb = float(raw) if raw.strip() else DEFAULT_MAX_FILE_MB
    except ValueError:
        mb = DEFAULT_MAX_FILE_MB
    if mb <= 0:
        mb = DEFAULT_MAX_FILE_MB
    return int(mb * 1024 * 1024)


def data_dir() -> Path:
    """Where Chunk Lab keeps caches and stores (``CHUNKLAB_DATA_DIR``, default ``~/.chunklab``)."""
    raw = os.environ.get("CHUNKLAB_DATA_DIR", "").strip()
    path = Path(raw).expanduser() if raw else Path.home() / ".chunklab"
    return path


# --- OpenAI-compatible APIs: the chat model and the remote scorer ------------------------------
#
# Read at call time (tests and the CLI change the environment between calls). A blank variable is
# unset; a number that does not parse, or is out of range, falls back to its default.

DEFAULT_LLM_TIMEOUT_S = 120.0
DEFAULT_LLM_RETRIES = 2
DEFAULT_REMOTE_TIMEOUT_S = 60.0
DEFAULT_REMOTE_RETRIES = 1
CHAT_BACKENDS = ("", "local", "remote")

__all__ += [
    "llm_base_url",
    "llm_api_key",
    "llm_model",
    "llm_timeout",
    "llm_retries",
    "chat_backend",
    "remote_base_url",
    "remote_api_key",
    "remote_model",
    "remote_timeout",
    "remote_retries",
    "DEFAULT_LLM_TIMEOUT_S",
    "DEFAULT_LLM_RETRIES",
    "DEFAULT_REMOTE_TIMEOUT_S",
    "DEFAULT_REMOTE_RETRIES",
    "CHAT_BACKENDS",
]


def _env_text(*names: str) -> str | None:
    """The first of ``names`` set to a non-blank value, stripped; None when none is."""
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def _env_seconds(name: str, default: float) -> float:
    """A positive number of seconds from ``name``, else ``default``."""
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        return default
    return value if value > 0 else default


def _env_count(name: str, default: int) -> int:
    """A count of at least 0 from ``name`` (a fraction is cut to its whole part), else ``default``."""
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else float(default)
    except ValueError:
        return default
    return int(value) if 0 <= value < float("inf") else default


def llm_base_url() -> str | None:
    """The chat API's base URL (``OPENAI_BASE_URL``); None means OpenAI's own API."""
    return _env_text("OPENAI_BASE_URL")


def llm_api_key() -> str | None:
    """The chat API's bearer token (``OPENAI_API_KEY``); None when unset."""
    return _env_text("OPENAI_API_KEY")


def llm_model() -> str | None:
    """The chat model's name (``OPENAI_MODEL``); None lets the server's only model answer."""
    return _env_text("OPENAI_MODEL")


def llm_timeout() -> float:
    """Seconds to wait for a chat answer (``CHUNKLAB_LLM_TIMEOUT``, default 120; must be above 0)."""
    return _env_seconds("CHUNKLAB_LLM_TIMEOUT", DEFAULT_LLM_TIMEOUT_S)


def llm_retries() -> int:
    """Retries of a failed chat request (``CHUNKLAB_LLM_RETRIES``, default 2; 0 turns them off)."""
    return _env_count("CHUNKLAB_LLM_RETRIES", DEFAULT_LLM_RETRIES)


def chat_backend() -> str:
    """Which chat model LLM chunkers use (``CHUNKLAB_CHAT``): ``"local"``, ``"remote"`` or ``""`` (pick).

    Raises:
        ModelError: any other value.
    """
    from backend.errors import ModelError

    choice = os.environ.get("CHUNKLAB_CHAT", "").strip().lower()
    if choice not in CHAT_BACKENDS:
        raise ModelError(f"CHUNKLAB_CHAT must be 'local', 'remote' or unset, got {choice!r}")
    return choice


def remote_base_url() -> str | None:
    """The remote scorer's base URL (``CHUNKLAB_REMOTE_BASE_URL``, else ``OPENAI_BASE_URL``)."""
    return _env_text("CHUNKLAB_REMOTE_BASE_URL", "OPENAI_BASE_URL")


def remote_api_key() -> str | None:
    """The remote scorer's bearer token (``CHUNKLAB_REMOTE_API_KEY``, else ``OPENAI_API_KEY``)."""
    return _env_text("CHUNKLAB_REMOTE_API_KEY", "OPENAI_API_KEY")


def remote_model() -> str | None:
    """The remote scorer's model (``CHUNKLAB_REMOTE_MODEL``); None lets the server's only model score."""
    return _env_text("CHUNKLAB_REMOTE_MODEL")


def remote_timeout() -> float:
    """Seconds to wait for a remote scorer's answer (``CHUNKLAB_REMOTE_TIMEOUT``, default 60; above 0)."""
    return _env_seconds("CHUNKLAB_REMOTE_TIMEOUT", DEFAULT_REMOTE_TIMEOUT_S)


def remote_retries() -> int:
    """Retries of a failed remote scorer request (``CHUNKLAB_REMOTE_RETRIES``, default 1; 0 turns them off)."""
    return _env_count("CHUNKLAB_REMOTE_RETRIES", DEFAULT_REMOTE_RETRIES)
