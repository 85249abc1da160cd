"""Where models run: device choice, dtypes, memory-sized batches and out-of-memory back-off.

``CHUNKLAB_DEVICE`` picks the device (``auto``, ``cuda``, ``cuda:1``, ``mps`` or ``cpu``);
``auto`` takes CUDA, then Apple MPS, then the CPU. :func:`run_batched` runs a batched model
call and, when a GPU runs out of memory, empties the allocator's cache, halves the batch and
retries the same items, so a batch size guessed too large costs a retry, not a crash.

torch is imported inside the functions: importing this module stays light.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import platform
import re
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence, TypeVar

import psutil

from backend.config import data_dir, default_device_spec, default_precision_spec, torch_threads
from backend.errors import ModelError, ParameterError
from backend.models.jsonstore import read_json_dict, write_json_atomic

if TYPE_CHECKING:
    import torch

__all__ = [
    "select_device",
    "apply_thread_setting",
    "default_dtype",
    "PRECISIONS",
    "SENTENCE_NLL_TOLERANCE",
    "BFLOAT16_NLL_TOLERANCE",
    "AUTO_MIN_SPEEDUP",
    "check_precision",
    "cpu_has_bfloat16",
    "reduced_linear",
    "measure_precision_speed",
    "best_seconds",
    "auto_precision",
    "forget_auto_precision",
    "default_precision",
    "set_precision",
    "requested_precision",
    "select_precision",
    "precision_suffix",
    "dtype_name",
    "free_memory_bytes",
    "suggest_batch_size",
    "run_batched",
    "is_out_of_memory",
    "empty_cache",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

_DEVICE_RE = re.compile(r"^(auto|cpu|mps|cuda)(?::(\d+))?$")
# CPU batches gain little beyond a few items (the matmuls are already as wide as the cores),
# and a large batch only delays the first progress report.
_CPU_BATCH_CAP = 8
# Share of the free memory a batch may plan to use: the model's own workspace, the
# allocator's fragmentation and other processes need the rest.
_GPU_MEMORY_SHARE = 0.5
_CPU_MEMORY_SHARE = 0.25


_threads_lock = threading.Lock()
_threads_applied: int | None = None  # the count this process last gave torch (None: not yet)


def apply_thread_setting() -> int:
    """Give torch its CPU thread count once per process, before any model runs; the count in use.

    The count is :func:`backend.config.torch_threads` (``CHUNKLAB_TORCH_THREADS``, default half
    the cores): every model loader calls this first. ``torch.set_num_threads`` sets the one
    intra-op pool of the whole process, so it is applied once, and again only when the
    variable changed since; the inter-op pool can only be sized before torch's first parallel
    work, so it is sized on the first call when it still can be.
    """
    global _threads_applied
    import torch

    wanted = torch_threads()
    with _threads_lock:
        if _threads_applied != wanted:
            first = _threads_applied is None
            torch.set_num_threads(wanted)
            if first:
                try:
                    torch.set_num_interop_threads(wanted)
                except RuntimeError:  # torch already ran parallel work in this process: its pool stays
                    pass
            _threads_applied = wanted
    return torch.get_num_threads()


def select_device(preferred: str | None = None) -> str:
    """The device to run models on: ``cuda:N``, ``mps`` or ``cpu``.

    Args:
        preferred: ``auto``, ``cpu``, ``mps``, ``cuda`` or ``cuda:N``; ``None`` or empty reads
            ``CHUNKLAB_DEVICE`` (default ``auto``: CUDA, then Apple MPS, then the CPU).

    Raises:
        ParameterError: for a value that names no device, or a device this machine lacks.
    """
    source = "device"
    raw = preferred
    if raw is None or not str(raw).strip():
        raw = default_device_spec()
        source = "CHUNKLAB_DEVICE"
    value = str(raw).strip().lower() or "auto"
    m = _DEVICE_RE.match(value)
    if m is None or (m.group(2) is not None and m.group(1) != "cuda"):
        raise ParameterError(f"{source} {raw!r} is not a device; use auto, cpu, mps, cuda or cuda:N")
    kind, index = m.group(1), m.group(2)
    if kind == "cpu":
        return "cpu"

    import torch

    cuda_ok = torch.cuda.is_available()
    mps_ok = _mps_available()
    if kind == "auto":
        if cuda_ok:
            return f"cuda:{torch.cuda.current_device()}"
        return "mps" if mps_ok else "cpu"
    if kind == "mps":
        if not mps_ok:
            raise ParameterError(f"{source} {raw!r}: Apple MPS is not available on this machine")
        return "mps"
    if not cuda_ok:
        why = "this torch build has no CUDA" if torch.version.cuda is None else "no CUDA GPU is visible"
        raise ParameterError(f"{source} {raw!r}: CUDA is not available ({why})")
    i = int(index) if index is not None else torch.cuda.current_device()
    count = torch.cuda.device_count()
    if i >= count:
        raise ParameterError(f"{source} {raw!r}: there is no CUDA device {i} (this machine has {count})")
    return f"cuda:{i}"


def _mps_available() -> bool:
    import torch

    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def default_dtype(device: str) -> "torch.dtype":
    """bfloat16 on CUDA GPUs that support it (else float16), float16 on MPS, float32 on the CPU."""
    import torch

    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device == "mps":
        return torch.float16
    return torch.float32


# The precisions of a language model. float32 is the reference, on every device.
#
# On a GPU (CUDA or MPS) the whole model runs in the precision asked for (its weights and
# activations; log-probabilities are still taken in float32), and auto is the device's
# default_dtype. bench/bench_gpu.py measures each against the CPU's float32 on the same weights
# (max |ΔNLL|, PPL boundaries) with scripts/device_check.sh. The CPU's own precisions:
#
# float16 keeps the decoder's linear layers' weights in float16 and runs those matmuls in float16
# (inputs cast, outputs back to float32; a result out of float16's range is recomputed in
# float32); norms, attention, the residual stream and the output head stay float32. Measured on
# the bundled SmolLM2 and samples: max |ΔNLL| of a sentence's mean NLL 0.004-0.008 nats, PPL
# boundaries at the default threshold identical on every sample. Its tolerance is
# SENTENCE_NLL_TOLERANCE and the same boundaries (tests/backend/models/test_precision.py on the two
# smallest samples; bench/bench_scorer.py --precisions float16 on every one).
#
# bfloat16 runs the decoder's matmuls under CPU autocast (head in float32). It has 3 fewer
# mantissa bits than float16: 0.06-0.10 nats per sentence, and on one of our machines it moved a
# PPL boundary of the Chinese sample. It is offered for CPUs where it is much faster (1.2-1.6x
# measured on one AVX512-BF16 machine, 0.5x on another), within BFLOAT16_NLL_TOLERANCE, never
# chosen by auto.
#
# auto measures: float16 when its matmul (the model path's own function, on SmolLM2's MLP shape)
# is at least AUTO_MIN_SPEEDUP times float32's on this machine, else float32. The choice is
# measured once per machine, torch version and thread count, and remembered in
# data_dir()/models/precision.json, so a machine keeps one choice (and one set of cache keys).
# (torch.ao's dynamic int8 was ~1.5x on the matmuls but 2.5 nats off: activation outliers defeat
# a per-token scale; an int8 split accurate to float16's level was slower than float32.
# bench/bench_scorer.py --kernels prints these ceilings.)
PRECISIONS = ("float32", "float16", "bfloat16", "auto")
SENTENCE_NLL_TOLERANCE = 0.02  # nats: float16's max |ΔNLL| of a sentence's mean NLL against float32
BFLOAT16_NLL_TOLERANCE = 0.15  # nats: bfloat16's, likewise (its boundaries may move)
AUTO_MIN_SPEEDUP = 1.10
_precision_override: str | None = None
_auto_choice: str | None = None
_auto_lock = threading.Lock()


def check_precision(precision: str, source: str = "precision") -> str:
    """``precision`` normalised (stripped, lower-case), or a one-line ParameterError naming ``source``."""
    p = str(precision).strip().lower()
    if p not in PRECISIONS:
        raise ParameterError(f"{source} {precision!r} is none of {', '.join(PRECISIONS)}")
    return p


def set_precision(precision: str | None) -> None:
    """Make ``precision`` this process's CPU precision (None: back to ``CHUNKLAB_PRECISION``).

    The CLI's ``--precision`` sets it (every model the command loads); the Models page passes
    its choice per session instead. Models already loaded at another precision stay loaded
    (they are held per precision, and their outputs are cached apart).

    Raises:
        ParameterError: ``precision`` is none of :data:`PRECISIONS`.
    """
    global _precision_override
    _precision_override = check_precision(precision) if precision is not None else None


def requested_precision() -> str:
    """The precision asked for (``set_precision``, else ``CHUNKLAB_PRECISION``, else float32), unresolved."""
    if _precision_override is not None:
        return _precision_override
    spec = default_precision_spec()
    return check_precision(spec, "CHUNKLAB_PRECISION") if spec else "float32"


def default_precision() -> str:
    """The precision asked for by ``CHUNKLAB_PRECISION`` (float32 when unset or naming none), unresolved."""
    try:
        return requested_precision()
    except ParameterError:
        return "float32"  # the bad value fails in one line where a model is loaded


def cpu_has_bfloat16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX; Apple's arm64 BF16 too).

    Native is not the same as faster (see :data:`PRECISIONS`'s notes): only the measurement in
    :func:`auto_precision` decides, and only between float32 and float16.
    """
    if platform.system() == "Darwin":
        return platform.machine() == "arm64"
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    return bool(re.search(r"\b(avx512_bf16|amx_bf16)\b", flags))


def reduced_linear(x: "torch.Tensor", weight: "torch.Tensor", bias: "torch.Tensor | None" = None) -> "torch.Tensor":
    """``x @ weight.T (+ bias)`` in ``weight``'s (reduced) dtype, returned in float32.

    A result that leaves float16's range (an input or output beyond ±65504) is recomputed in
    float32 from the same weights, so a rare large activation costs time, never an inf.
    """
    import torch.nn.functional as F

    y = F.linear(x.to(weight.dtype), weight).float()
    if not bool(y.sum().isfinite()):  # one reduction: any inf or nan makes the sum non-finite
        y = F.linear(x.float(), weight.float())
    return y if bias is None else y + bias.float()


def measure_precision_speed(precision: str, rows: int = 512, repeat: int = 5) -> float:
    """Best seconds of one matmul of SmolLM2's MLP shape (rows x 576 @ 576 x 1536) at ``precision``.

    float32 is ``F.linear``; float16 and bfloat16 go through :func:`reduced_linear`, the model
    path's own function, casts included.
    """
    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(rows, 576, generator=gen)
    w = torch.randn(1536, 576, generator=gen) / 24
    if precision == "float32":
        def run() -> object:
            return F.linear(x, w)
    else:
        wr = w.to(getattr(torch, precision))

        def run() -> object:
            return reduced_linear(x, wr)

    with torch.inference_mode():
        return best_seconds(run, repeat)


def best_seconds(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` timed calls of ``fn``, after one untimed warm-up call."""
    fn()
    best = float("inf")
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _machine_key() -> str:
    """This CPU (model name and flags), the torch version and its thread count, hashed."""
    import torch

    try:
        info = Path("/proc/cpuinfo").read_text(errors="replace")
        lines = [ln for ln in info.splitlines() if ln.startswith(("model name", "flags", "Features"))][:2]
    except OSError:
        lines = []
    text = "\n".join([platform.machine(), platform.processor(), *lines, torch.__version__, str(torch.get_num_threads())])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def auto_precision() -> str:
    """What ``auto`` means on this machine: float16 where measured at least :data:`AUTO_MIN_SPEEDUP` x float32, else float32.

    Measured once (about a second) and remembered in ``data_dir()/models/precision.json`` per
    machine key, so the choice, and with it the cache keys, stays put across processes. Where
    the file cannot be written the measurement is kept for this process only.
    """
    global _auto_choice
    with _auto_lock:
        if _auto_choice is not None:
            return _auto_choice
        key = _machine_key()
        store = data_dir() / "models" / "precision.json"
        known = read_json_dict(store)
        entry = known.get(key)
        if isinstance(entry, dict) and entry.get("auto") in ("float32", "float16"):
            _auto_choice = str(entry["auto"])
            return _auto_choice
        f32, f16 = measure_precision_speed("float32"), measure_precision_speed("float16")
        # Measured again once: a busy moment must not decide for good.
        f32, f16 = min(f32, measure_precision_speed("float32")), min(f16, measure_precision_speed("float16"))
        speedup = f32 / max(f16, 1e-12)
        _auto_choice = "float16" if speedup >= AUTO_MIN_SPEEDUP else "float32"
        known[key] = {"auto": _auto_choice, "float16_speedup": round(speedup, 3)}
        write_json_atomic(store, known)  # a read-only data dir: measured again by the next process
        return _auto_choice


def forget_auto_precision() -> None:
    """Drop this process's memory of ``auto``'s choice (the file stays); tests use it."""
    global _auto_choice
    with _auto_lock:
        _auto_choice = None


def select_precision(device: str, precision: str | None = None) -> str:
    """The precision a language model runs at on ``device``: float32, float16 or bfloat16.

    On the CPU, ``auto`` is :func:`auto_precision` (measured) and the reduced precisions keep
    parts of the model in float32 (see :data:`PRECISIONS`). On a GPU the whole model runs in
    the precision asked for, and ``auto`` is the device's :func:`default_dtype` (bfloat16 where
    the GPU supports it, else float16). The default everywhere is float32, the reference whose
    cached outputs every device shares.

    Raises:
        ParameterError: ``precision`` is none of :data:`PRECISIONS`, or bfloat16 on a CUDA GPU
            without it.
    """
    p = check_precision(precision) if precision else requested_precision()
    if device == "cpu":
        return auto_precision() if p == "auto" else p
    if p == "auto":
        return dtype_name(default_dtype(device))
    if p == "bfloat16" and device.startswith("cuda"):
        import torch

        if torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
            raise ParameterError(f"precision 'bfloat16': {device} does not support it; use float16 or float32")
    return p


def precision_suffix(precision: str, device: str = "cpu") -> str:
    """What a model's fingerprint gains at ``precision`` on ``device``: '' for float32 (keys as before).

    ``+float16`` etc. on the CPU; ``+float16-cuda`` (``-mps``) on a GPU, whose half precision
    runs the whole model in it, not the CPU's mix, so their cached outputs stay apart. float32
    is the same computation everywhere (within float rounding) and shares one key.
    """
    if precision == "float32":
        return ""
    kind = device.split(":")[0]
    return f"+{precision}" if kind == "cpu" else f"+{precision}-{kind}"


def dtype_name(dtype: "torch.dtype") -> str:
    """``torch.bfloat16`` -> ``bfloat16``."""
    return str(dtype).removeprefix("torch.")


def free_memory_bytes(device: str) -> int | None:
    """Memory a new allocation can use on ``device``, in bytes (None when unknown).

    CUDA: free device memory plus what torch's allocator holds unused. MPS: the recommended
    working-set size minus what the driver has allocated. CPU: the system's available memory.
    """
    if device.startswith("cuda"):
        import torch

        free, _total = torch.cuda.mem_get_info(torch.device(device))
        reserved_unused = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(free + max(0, reserved_unused))
    if device == "mps":
        import torch

        try:
            return max(0, int(torch.mps.recommended_max_memory() - torch.mps.driver_allocated_memory()))
        except (AttributeError, RuntimeError):
            return None
    return int(psutil.virtual_memory().available)


def suggest_batch_size(device: str, bytes_per_item: int, cap: int = 64) -> int:
    """How many items of ``bytes_per_item`` working memory fit in one batch (1 to ``cap``).

    GPUs plan with half their free memory; the CPU with a quarter of the available memory and
    at most 8 items (wider CPU batches are not faster). Unknown free memory gives 1 on a GPU
    and 4 on the CPU. :func:`run_batched` halves the batch if the estimate proves too large.

    Raises:
        ParameterError: when ``bytes_per_item`` or ``cap`` is not positive.
    """
    if bytes_per_item <= 0:
        raise ParameterError(f"bytes_per_item ({bytes_per_item}) must be positive")
    if cap < 1:
        raise ParameterError(f"cap ({cap}) must be at least 1")
    on_cpu = not (device.startswith("cuda") or device == "mps")
    free = free_memory_bytes(device)
    if free is None:
        return max(1, min(cap, 4 if on_cpu else 1))
    share = _CPU_MEMORY_SHARE if on_cpu else _GPU_MEMORY_SHARE
    fit = int(free * share) // bytes_per_item
    limit = min(cap, _CPU_BATCH_CAP) if on_cpu else cap
    return max(1, min(limit, fit))


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is a device out-of-memory error (CUDA, MPS or the CPU allocator)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(error, getattr(torch, "OutOfMemoryError", ())):
        return True
    message = str(error).lower()
    # MPS and older CUDA builds raise RuntimeError; the CPU allocator says "can't allocate memory".
    return isinstance(error, RuntimeError) and ("out of memory" in message or "can't allocate memory" in message)


def empty_cache() -> None:
    """Give the allocator's cached blocks back (CUDA and MPS), so a retry starts clean."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is None:
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    if _mps_available():
        torch.mps.empty_cache()


def run_batched(
    fn: Callable[[Sequence[T]], Sequence[R]],
    items: Sequence[T],
    batch_size: int,
    *,
    progress: Callable[[int, int], None] | None = None,
    on_oom: Callable[[int], None] | None = None,
) -> list[R]:
    """``fn`` over ``items`` in batches, halving the batch whenever the device runs out of memory.

    Each halving is logged as a warning (logger ``backend.models.devices``).

    Args:
        fn: Takes a batch (a slice of ``items``) and returns one result per item, in order.
        items: What to process.
        batch_size: The first batch size to try (at least 1).
        progress: Called with ``(items done, total)`` after each batch; it may raise
            :class:`~backend.errors.Cancelled`, which propagates.
        on_oom: Called with the new (halved) batch size after an out-of-memory error.

    Returns:
        The results of every item, in the order of ``items``.

    Raises:
        ModelError: when even a batch of one item runs out of memory, or ``fn`` returns the
            wrong number of results.
        ParameterError: when ``batch_size`` is below 1.
    """
    if batch_size < 1:
        raise ParameterError(f"batch_size ({batch_size}) must be at least 1")
    total = len(items)
    results: list[R] = []
    done = 0
    size = batch_size
    while done < total:
        batch = items[done : done + size]
        oom: str | None = None
        try:
            out = fn(batch)
        except Exception as e:  # only out-of-memory errors are handled; the rest propagate
            if not is_out_of_memory(e):
                raise
            oom = str(e).splitlines()[0] if str(e) else type(e).__name__
        if oom is not None:
            # Handled outside the except block: the traceback's frames hold the batch's
            # tensors, and they must be freed before the allocator can give memory back.
            empty_cache()
            if len(batch) == 1:
                raise ModelError(
                    f"out of memory even at batch size 1 ({oom}); use a smaller model, a shorter window, "
                    "or the CPU (CHUNKLAB_DEVICE=cpu)"
                )
            size = max(1, len(batch) // 2)
            log.warning("out of memory at a batch of %d (%s); retrying at %d", len(batch), oom, size)
            if on_oom is not None:
                on_oom(size)
            continue
        out = list(out)
        if len(out) != len(batch):
            raise ModelError(f"a batch of {len(batch)} items gave {len(out)} results")
        results.extend(out)
        done += len(batch)
        if progress is not None:
            progress(done, total)
    return results
