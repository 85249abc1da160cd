"""Settings read from environment variables, with their defaults.

Every environment variable the backend reads goes through a function here (the chat and
remote-model settings through theirs), and each is declared once in :data:`ENVIRONMENT` with its
default and meaning: the docs' environment table is generated from it
(``backend.cli.docs.environment_markdown``). ``HF_*`` and ``TRANSFORMERS_OFFLINE`` belong to the
Hugging Face libraries and mean here what they mean there. Each is read at call time, not at import, so a test or a long-running app
sees a changed environment; a value that cannot be read falls back to the default, except
where a wrong value would silently do something else (a port, a device), which raises.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import huggingface_hub.utils as hub_utils

from backend.errors import ModelError, ParameterError

__all__ = [
    # the registry of variables
    "EnvVar",
    "ENVIRONMENT",
    # files and data
    "DEFAULT_MAX_FILE_MB",
    "max_file_bytes",
    "data_dir",
    # corpus runs
    "ray_address",
    # the model output cache
    "DEFAULT_CACHE_MAX_MB",
    "cache_dir",
    "cache_max_bytes",
    # models
    "default_device_spec",
    "default_precision_spec",
    "torch_threads",
    "default_torch_threads",
    "default_lm_spec",
    "default_embedder_spec",
    # the Hugging Face hub
    "DEFAULT_HF_ENDPOINT",
    "hub_offline",
    "hub_offline_variable",
    "hf_endpoint",
    "quiet_hub_progress_bars",
    # the Chroma server
    "DEFAULT_CHROMA_TIMEOUT_S",
    "chroma_host",
    "chroma_port",
    "chroma_timeout",
    # the CLI
    "debug",
    # demo mode
    "demo",
    # OpenAI-compatible APIs: the chat model and the remote scorer
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
    "remote_concurrency",
    "DEFAULT_LLM_TIMEOUT_S",
    "DEFAULT_LLM_RETRIES",
    "DEFAULT_REMOTE_TIMEOUT_S",
    "DEFAULT_REMOTE_RETRIES",
    "DEFAULT_REMOTE_CONCURRENCY",
    "MAX_REMOTE_CONCURRENCY",
    "CHAT_BACKENDS",
    # the remote embedder
    "embedder_base_url",
    "embedder_api_key",
    "embedder_model",
    "embedder_timeout",
    "embedder_retries",
    "embedder_concurrency",
    "embedder_batch",
    "embedder_dimensions",
    "DEFAULT_EMBEDDER_BATCH",
    "MAX_EMBEDDER_BATCH",
]

_TRUE = frozenset({"1", "true", "yes", "on"})


@dataclass(frozen=True)
class EnvVar:
    """One environment variable Chunk Lab reads: its name, its default as the reader sees it, what it means.

    ``default`` and ``help`` are Markdown, as the docs' generated table shows them
    (``backend.cli.docs.environment_markdown``).
    """

    name: str
    default: str
    help: str


# Every variable the readers below look up, in the order the docs list them. A reader names its
# variable through :func:`_registered`, so one that is not here fails at its first call (and in the tests).
ENVIRONMENT: tuple[EnvVar, ...] = (
    EnvVar("CHUNKLAB_MAX_FILE_MB", "`50`",
           "largest document accepted, in MB (`scripts/app.sh` also sets Streamlit's upload limit from it)"),
    EnvVar("CHUNKLAB_DATA_DIR", "`~/.chunklab`",
           "converted models (the SmolLM2 GGUF dequantized once, ~540 MB, under `models/`), the tokenizer converted "
           "from it, weight hashes"),
    EnvVar("CHUNKLAB_CACHE_DIR", "`$CHUNKLAB_DATA_DIR/cache`",
           "the on-disk cache of model outputs (token scores, conditional scores), shared by every session and the CLI"),
    EnvVar("CHUNKLAB_CACHE_MAX_MB", "`2048`",
           "size bound of that cache; least recently used entries are evicted beyond it"),
    EnvVar("CHUNKLAB_PRECISION", "`float32`",
           "the local language model's precision (`--precision` and the Models page override it). On the CPU: "
           "`float32`, `float16` (the decoder's linear layers in float16; norms, attention and the output head in "
           "float32), `bfloat16` (decoder matmuls under bfloat16 autocast, head in float32) or `auto` (float16 where "
           "it measured at least 1.1× float32 on this machine, else float32; measured once per machine, torch version "
           "and thread count and remembered in `$CHUNKLAB_DATA_DIR/models/precision.json`); each precision has its own "
           "cache entries. On a GPU the whole model runs in the precision named (`auto`: bfloat16, or float16 where "
           "the GPU lacks it; the default stays float32, whose cached outputs every device shares)"),
    EnvVar("CHUNKLAB_TORCH_THREADS", "half the cores this process may use, at least 1 (`1` on 2 cores)",
           "CPU threads of torch's one intra-op pool for the whole process (its inter-op pool too when it can still "
           "be sized), set once before the first model loads. Model jobs run side by side (one per model), so "
           "torch's own default of one thread per core would put twice as many threads as cores to work, and a "
           "thread waiting for a core stalls its whole forward pass. Measured by `bench/bench_threads.py` (4 passes "
           "of a 256-token SmolLM2 forward and a 16-sentence MiniLM batch, best and median of 3 rounds) on the "
           "shared 2-core machine, load average 2 to 7: 2 threads instead of 1 made each model alone at most 1.7× "
           "faster in a quiet round (best: 0.67× / 0.59× the time) but 2.6× to 10× slower in the median round "
           "(7.9–9.0× for SmolLM2, 3.6–9.7× for MiniLM); both models' jobs side by side took 0.8× to 3.3× as long. "
           "Set it to the number of cores on a machine where the app runs alone and one job at a time"),
    EnvVar("CHUNKLAB_DEVICE", "`auto`",
           "where models run: `auto` (CUDA, then Apple MPS, then CPU), `cuda`, `cuda:N`, `mps` or `cpu`; bf16/fp16 "
           "on a GPU, fp32 on the CPU"),
    EnvVar("CHUNKLAB_LM", "`smollm2`",
           "the default causal LM: `smollm2` (bundled), a checkpoint folder, a `.gguf` file or a hub id"),
    EnvVar("CHUNKLAB_EMBEDDER", "`minilm`",
           "the default embedder: `minilm` (bundled all-MiniLM-L6-v2), a folder, a hub id, or `remote` / an "
           "`http(s)://…/v1` URL (an embeddings server, see Remote embeddings)"),
    EnvVar("CHUNKLAB_EMBEDDER_BASE_URL", "`OPENAI_BASE_URL`; neither: OpenAI's API",
           "the OpenAI-compatible `/v1/embeddings` server of `--embedder remote`"),
    EnvVar("CHUNKLAB_EMBEDDER_MODEL", "the server's only model",
           "the embedding model's name (a server listing several needs it)"),
    EnvVar("CHUNKLAB_EMBEDDER_API_KEY", "`OPENAI_API_KEY`",
           "bearer token for that server; held in memory only, never written to disk, caches, logs or errors"),
    EnvVar("CHUNKLAB_EMBEDDER_TIMEOUT", "`60`", "seconds to wait for an embeddings answer (above 0; connect: 5)"),
    EnvVar("CHUNKLAB_EMBEDDER_RETRIES", "`1`", "retries of failed embeddings requests (`0` turns them off)"),
    EnvVar("CHUNKLAB_EMBEDDER_CONCURRENCY", "`8`",
           "embeddings requests in flight at once (1–64; out of range or unreadable means 8)"),
    EnvVar("CHUNKLAB_EMBEDDER_BATCH", "`64`",
           "texts per embeddings request (1–2048; out of range or unreadable means 64)"),
    EnvVar("CHUNKLAB_EMBEDDER_DIMENSIONS", "unset: the model's own length",
           "the `dimensions` request field (OpenAI's text-embedding-3 models shorten their vectors); part of the cache "
           "identity; a model that ignores it is refused in one line"),
    EnvVar("CHUNKLAB_REMOTE_BASE_URL", "`OPENAI_BASE_URL`",
           "an OpenAI-compatible completions endpoint (ending in `/v1`) that returns prompt log-probs, for remote "
           "scoring: vLLM (echo or its `prompt_logprobs`); llama.cpp, Ollama and OpenAI's API return none"),
    EnvVar("CHUNKLAB_REMOTE_MODEL", "the server's only model",
           "the served model's name; refused in one line when the server lists its models and not this one"),
    EnvVar("CHUNKLAB_REMOTE_API_KEY", "`OPENAI_API_KEY`",
           "bearer token for that endpoint; held in memory only, never written to disk, caches, logs or exports"),
    EnvVar("CHUNKLAB_REMOTE_TIMEOUT", "`60`", "seconds to wait for a remote scorer's answer (above 0)"),
    EnvVar("CHUNKLAB_REMOTE_RETRIES", "`1`", "retries of failed remote scorer requests (`0` turns them off)"),
    EnvVar("CHUNKLAB_REMOTE_CONCURRENCY", "`8`",
           "remote scorer requests in flight at once (1–64; out of range or unreadable means 8); raise it when the "
           "remote URL is a load balancer over several vLLM servers; 1 sends one request at a time"),
    EnvVar("CHROMA_HOST", "unset: embedded Chroma in `$CHUNKLAB_DATA_DIR/chroma`",
           "a Chroma server for the retrieval lab: `host`, `host:port` or `http://host:port`"),
    EnvVar("CHROMA_PORT", "`8000`", "that server's port (applies to `CHROMA_HOST`); not a port number: an error"),
    EnvVar("CHROMA_TIMEOUT", "`10`", "seconds to wait for the Chroma server"),
    EnvVar("OPENAI_BASE_URL", "unset: OpenAI's API",
           "OpenAI-compatible chat API for question generation and the LLM chunkers (vLLM, llama.cpp, Ollama…)"),
    EnvVar("OPENAI_API_KEY", "unset",
           "its key; never written to disk, caches, logs, results or error messages"),
    EnvVar("OPENAI_MODEL", "the server's only model, else `gpt-4o-mini`",
           "the chat model for question generation and the LLM chunkers; it must be one the server's `GET /models` "
           "lists (when it lists any); cached answers are keyed by what the server says it serves (see the LLM client)"),
    EnvVar("CHUNKLAB_CHAT", "unset",
           "chat model of the LLM chunkers: `local` (the bundled SmolLM2, or `CHUNKLAB_LM`), `remote` (the "
           "OpenAI-compatible API); unset: the API when `OPENAI_BASE_URL` or `OPENAI_API_KEY` is set, else local; "
           "any other value is an error"),
    EnvVar("CHUNKLAB_LLM_TIMEOUT", "`120`",
           "the least seconds to wait for a chat answer (above 0; connect: 10), longer where the server's measured "
           "token speed predicts a longer answer (see the LLM client)"),
    EnvVar("CHUNKLAB_LLM_RETRIES", "`2`",
           "retries of failed chat requests (429/5xx/timeouts, with back-off; never a 401)"),
    EnvVar("CHUNKLAB_DEMO", "unset",
           "`1`, `true`, `yes` or `on` opens every session in demo mode: the narrative sample, the demo "
           "configurations, model outputs read from `assets/demo/cache`, and the tour"),
    EnvVar("RAY_ADDRESS", "unset: `--engine ray` starts a local Ray",
           "the Ray cluster `corpus --engine ray` joins (`--address` overrides it), Ray's own variable"),
    EnvVar("CHUNKLAB_PIP_SOURCE", "this checkout's folder (a clone), else `chunk-lab` from the package index",
           "where the \"Use in your pipeline\" pip line installs Chunk Lab from: a folder, a wheel file or a "
           "`git+https://…` URL (PEP 508's `chunk-lab[extras] @ SOURCE`)"),
    EnvVar("CHUNKLAB_DEBUG", "unset", "set to `1` to let the CLI print a traceback on an internal error"),
    EnvVar("HF_HUB_OFFLINE", "unset",
           "`1` (or `true`, `yes`, `on`) means offline for both the LM and the embedder loaders (a hub id then fails "
           "with one line naming the variable); `scripts/test.sh` sets it; nothing in Chunk Lab needs the hub"),
    EnvVar("TRANSFORMERS_OFFLINE", "unset",
           "the same as `HF_HUB_OFFLINE`: either one set means offline for both loaders; `scripts/test.sh` sets both"),
    EnvVar("HF_ENDPOINT", "`https://huggingface.co`",
           "the hub a hub id is fetched from (checked for reachability before a download)"),
    EnvVar("HF_HUB_DISABLE_PROGRESS_BARS", "unset: the CLI turns the hub's progress bars off",
           "the Hugging Face libraries' own switch; when set, the CLI leaves the hub's and transformers' progress "
           "bars as it says (the CLI's own progress line goes to stderr either way)"),
)
_BY_NAME = {var.name: var for var in ENVIRONMENT}


def _registered(name: str) -> str:
    """``name``, once it is known to be in :data:`ENVIRONMENT` (KeyError otherwise: a reader the docs would miss)."""
    return _BY_NAME[name].name


def _get(name: str) -> str:
    """The variable ``name`` stripped of surrounding whitespace; '' when unset."""
    return os.environ.get(_registered(name), "").strip()


# --- files and data ------------------------------------------------------------------------

DEFAULT_MAX_FILE_MB = 50.0


def max_file_bytes() -> int:
    """The upload size limit in bytes (``CHUNKLAB_MAX_FILE_MB``, default 50 MB).

    A value that is not a positive finite number means the default.
    """
    return _megabytes("CHUNKLAB_MAX_FILE_MB", DEFAULT_MAX_FILE_MB)


def data_dir() -> Path:
    """Where Chunk Lab keeps caches and stores (``CHUNKLAB_DATA_DIR``, default ``~/.chunklab``)."""
    raw = _get("CHUNKLAB_DATA_DIR")
    return Path(raw).expanduser() if raw else Path.home() / ".chunklab"


def _megabytes(name: str, default: float) -> int:
    """A size in MB read from ``name``, in bytes; the default for unset, unreadable or non-positive values."""
    raw = _get(name)
    try:
        mb = float(raw) if raw else default
    except ValueError:
        mb = default
    if not (mb > 0 and math.isfinite(mb)):
        mb = default
    return int(mb * 1024 * 1024)


def pip_source() -> str:
    """Where the "Use in your pipeline" pip line installs Chunk Lab from (``CHUNKLAB_PIP_SOURCE``).

    Unset: this checkout's folder when the code runs from one (its ``pyproject.toml`` beside
    ``backend/``), as a ``file://`` URL; '' for an installed distribution (then the pip line
    names ``chunk-lab`` on the package index).
    """
    raw = _get("CHUNKLAB_PIP_SOURCE")
    if raw:
        return raw
    root = Path(__file__).resolve().parents[1]
    return root.as_uri() if (root / "pyproject.toml").is_file() else ""


# --- the model output cache ----------------------------------------------------------------

DEFAULT_CACHE_MAX_MB = 2048.0


def cache_dir() -> Path:
    """Where model outputs are cached (``CHUNKLAB_CACHE_DIR``, default ``<data dir>/cache``)."""
    raw = _get("CHUNKLAB_CACHE_DIR")
    return Path(raw).expanduser() if raw else data_dir() / "cache"


def cache_max_bytes() -> int:
    """The cache size bound in bytes (``CHUNKLAB_CACHE_MAX_MB``, default 2048 MB).

    A value that is not a positive finite number means the default.
    """
    return _megabytes("CHUNKLAB_CACHE_MAX_MB", DEFAULT_CACHE_MAX_MB)


# --- models --------------------------------------------------------------------------------


def default_device_spec() -> str:
    """The device named by ``CHUNKLAB_DEVICE``, as written (stripped); '' when unset.

    :func:`backend.models.devices.select_device` reads '' as ``auto`` and rejects a value
    that names no device, naming the variable.
    """
    return _get("CHUNKLAB_DEVICE")


def default_precision_spec() -> str:
    """The precision named by ``CHUNKLAB_PRECISION`` (stripped, lower-case); '' when unset (float32).

    :func:`backend.models.devices.select_precision` rejects a value that names no precision.
    """
    return _get("CHUNKLAB_PRECISION").lower()


def default_torch_threads() -> int:
    """The CPU threads torch gets when ``CHUNKLAB_TORCH_THREADS`` is unset: half the cores this process may use, at least 1.

    Model jobs run side by side (one per model: language model, embedder, chat model), and
    torch's thread pool is one per process: with torch's own default (one thread per core) two
    jobs run twice as many threads as there are cores, and a thread that waits for a core
    slows its whole forward pass down. Measured with ``bench/bench_threads.py`` on the
    project's shared 2-core machine (load average 2 to 7; the numbers are in ``CHUNKLAB_TORCH_THREADS``'s
    entry of :data:`ENVIRONMENT`): 2 threads instead of 1 made SmolLM2 and MiniLM at most
    1.7x faster in a quiet moment, and 2.6x to 10x slower in the median round; the two models'
    jobs side by side took 0.8x to 3.3x as long. Half the cores keeps two jobs within the cores
    on larger machines too.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // 2)


def torch_threads() -> int:
    """The CPU threads torch uses for the models: ``CHUNKLAB_TORCH_THREADS``, else :func:`default_torch_threads`.

    A value that is not a positive integer falls back to the default.
    """
    raw = _get("CHUNKLAB_TORCH_THREADS")
    return int(raw) if raw.isdigit() and int(raw) > 0 else default_torch_threads()


def default_lm_spec() -> str:
    """The default causal LM named by ``CHUNKLAB_LM`` (stripped); '' when unset (the bundled SmolLM2)."""
    return _get("CHUNKLAB_LM")


def default_embedder_spec() -> str:
    """The default embedder named by ``CHUNKLAB_EMBEDDER`` (stripped); '' when unset (the bundled MiniLM)."""
    return _get("CHUNKLAB_EMBEDDER")


# --- the Hugging Face hub ------------------------------------------------------------------

DEFAULT_HF_ENDPOINT = "https://huggingface.co"
_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def hub_offline_variable() -> str | None:
    """The variable that puts the hub offline, or None.

    ``HF_HUB_OFFLINE``, then ``TRANSFORMERS_OFFLINE``, when set to ``1``, ``true``, ``yes``
    or ``on`` (any case): huggingface_hub itself honours both.
    """
    for name in _OFFLINE_VARIABLES:
        if _get(name).lower() in _TRUE:
            return name
    return None


def hub_offline() -> bool:
    """Whether the Hugging Face hub must not be contacted (see :func:`hub_offline_variable`)."""
    return hub_offline_variable() is not None


def hf_endpoint() -> str:
    """The Hugging Face hub's URL (``HF_ENDPOINT``, default ``https://huggingface.co``)."""
    return _get("HF_ENDPOINT") or DEFAULT_HF_ENDPOINT


def quiet_hub_progress_bars() -> None:
    """Turn off the hub's and transformers' progress bars, unless ``HF_HUB_DISABLE_PROGRESS_BARS`` is set.

    For the CLI, whose own progress line goes to stderr. The hub reads the variable when it is
    imported (the model modules import it at their top), so its switch is turned off here too;
    transformers, imported later by the model adapters, follows the hub's switch.
    """
    name = _registered("HF_HUB_DISABLE_PROGRESS_BARS")
    if name in os.environ:
        return
    os.environ[name] = "1"
    hub_utils.disable_progress_bars()


# --- the Chroma server ---------------------------------------------------------------------

DEFAULT_CHROMA_TIMEOUT_S = 10.0


def chroma_host() -> str | None:
    """The Chroma server named by ``CHROMA_HOST`` (stripped), or None for the embedded store."""
    return _get("CHROMA_HOST") or None


def chroma_port() -> int | None:
    """The port in ``CHROMA_PORT``, or None when unset.

    Raises:
        ParameterError: a value that is not a port number (1-65535).
    """
    raw = _get("CHROMA_PORT")
    if not raw:
        return None
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ParameterError(f"CHROMA_PORT must be a port number, got {raw!r}")
    return int(raw)


def chroma_timeout() -> float:
    """Seconds to wait for the Chroma server (``CHROMA_TIMEOUT``, default 10).

    A value that is not a positive number means the default.
    """
    raw = _get("CHROMA_TIMEOUT")
    try:
        value = float(raw) if raw else DEFAULT_CHROMA_TIMEOUT_S
    except ValueError:
        return DEFAULT_CHROMA_TIMEOUT_S
    return value if value > 0 else DEFAULT_CHROMA_TIMEOUT_S


# --- corpus runs on Ray ---------------------------------------------------------------------


def ray_address() -> str | None:
    """The Ray cluster ``--engine ray`` joins (``RAY_ADDRESS``, Ray's own variable; None: a local Ray)."""
    return _get("RAY_ADDRESS") or None


# --- the CLI -------------------------------------------------------------------------------


def debug() -> bool:
    """Whether the CLI lets an internal error's traceback through (``CHUNKLAB_DEBUG`` set to anything)."""
    return bool(os.environ.get(_registered("CHUNKLAB_DEBUG")))


# --- demo mode ------------------------------------------------------------------------------


def demo() -> bool:
    """Whether the app opens in demo mode (``CHUNKLAB_DEMO`` set to ``1``, ``true``, ``yes`` or ``on``, any case).

    Demo mode opens the bundled narrative sample with the demo configurations and serves the
    model outputs they need from the read-only cache shipped in ``assets/demo/cache``.
    """
    return _get("CHUNKLAB_DEMO").lower() in _TRUE


# --- OpenAI-compatible APIs: the chat model and the remote scorer ------------------------------
#
# Read at call time (tests and the CLI change the environment between calls). A blank variable is
# unset; a number that does not parse, or is out of range, falls back to its default.

DEFAULT_LLM_TIMEOUT_S = 120.0
DEFAULT_LLM_RETRIES = 2
DEFAULT_REMOTE_TIMEOUT_S = 60.0
DEFAULT_REMOTE_RETRIES = 1
DEFAULT_REMOTE_CONCURRENCY = 8
MAX_REMOTE_CONCURRENCY = 64  # requests in flight at once; more only queues on the server
CHAT_BACKENDS = ("", "local", "remote")



def _env_text(*names: str) -> str | None:
    """The first of ``names`` set to a non-blank value, stripped; None when none is."""
    for name in names:
        value = os.environ.get(_registered(name), "").strip()
        if value:
            return value
    return None


def _env_seconds(name: str, default: float) -> float:
    """A positive number of seconds from ``name``, else ``default``."""
    raw = os.environ.get(_registered(name), "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        return default
    return value if value > 0 else default


def _env_count(name: str, default: int) -> int:
    """A count of at least 0 from ``name`` (a fraction is cut to its whole part), else ``default``."""
    raw = os.environ.get(_registered(name), "").strip()
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
    choice = os.environ.get(_registered("CHUNKLAB_CHAT"), "").strip().lower()
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


def remote_concurrency() -> int:
    """Remote scorer requests in flight at once (``CHUNKLAB_REMOTE_CONCURRENCY``, default 8; 1 to 64).

    1 sends one request at a time. A fraction is cut to its whole part; a value below 1,
    above 64 or unreadable means the default.
    """
    value = _env_count("CHUNKLAB_REMOTE_CONCURRENCY", DEFAULT_REMOTE_CONCURRENCY)
    return value if 1 <= value <= MAX_REMOTE_CONCURRENCY else DEFAULT_REMOTE_CONCURRENCY


# --- the remote embedder (``--embedder remote``) ---------------------------------------------------

DEFAULT_EMBEDDER_BATCH = 64  # texts per /embeddings request
MAX_EMBEDDER_BATCH = 2048  # OpenAI's limit of inputs per request


def embedder_base_url() -> str | None:
    """The remote embedder's base URL (``CHUNKLAB_EMBEDDER_BASE_URL``, else ``OPENAI_BASE_URL``; None: OpenAI's API)."""
    return _env_text("CHUNKLAB_EMBEDDER_BASE_URL", "OPENAI_BASE_URL")


def embedder_api_key() -> str | None:
    """The remote embedder's bearer token (``CHUNKLAB_EMBEDDER_API_KEY``, else ``OPENAI_API_KEY``)."""
    return _env_text("CHUNKLAB_EMBEDDER_API_KEY", "OPENAI_API_KEY")


def embedder_model() -> str | None:
    """The remote embedder's model (``CHUNKLAB_EMBEDDER_MODEL``); None lets the server's only model embed."""
    return _env_text("CHUNKLAB_EMBEDDER_MODEL")


def embedder_timeout() -> float:
    """Seconds to wait for a remote embedder's answer (``CHUNKLAB_EMBEDDER_TIMEOUT``, default 60; above 0)."""
    return _env_seconds("CHUNKLAB_EMBEDDER_TIMEOUT", DEFAULT_REMOTE_TIMEOUT_S)


def embedder_retries() -> int:
    """Retries of a failed remote embedder request (``CHUNKLAB_EMBEDDER_RETRIES``, default 1; 0 turns them off)."""
    return _env_count("CHUNKLAB_EMBEDDER_RETRIES", DEFAULT_REMOTE_RETRIES)


def embedder_concurrency() -> int:
    """Remote embedder requests in flight at once (``CHUNKLAB_EMBEDDER_CONCURRENCY``, default 8; 1 to 64)."""
    value = _env_count("CHUNKLAB_EMBEDDER_CONCURRENCY", DEFAULT_REMOTE_CONCURRENCY)
    return value if 1 <= value <= MAX_REMOTE_CONCURRENCY else DEFAULT_REMOTE_CONCURRENCY


def embedder_batch() -> int:
    """Texts per remote embedder request (``CHUNKLAB_EMBEDDER_BATCH``, default 64; 1 to 2,048)."""
    value = _env_count("CHUNKLAB_EMBEDDER_BATCH", DEFAULT_EMBEDDER_BATCH)
    return value if 1 <= value <= MAX_EMBEDDER_BATCH else DEFAULT_EMBEDDER_BATCH


def embedder_dimensions() -> int | None:
    """The vector length to ask the remote embedder for (``CHUNKLAB_EMBEDDER_DIMENSIONS``; None: the model's own).

    Only models that can shorten their vectors take it (OpenAI's text-embedding-3-*); a value
    below 1 or unreadable means unset.
    """
    value = _env_count("CHUNKLAB_EMBEDDER_DIMENSIONS", 0)
    return value if value >= 1 else None
