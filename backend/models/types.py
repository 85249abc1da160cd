"""Types shared by the model backend: model identity, token scores, the scorer protocol, progress."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from backend.errors import Cancelled

__all__ = ["ModelInfo", "TokenScores", "Scorer", "Progress", "CancelToken", "ProgressTracker"]

# progress(done, total) — called from the computing thread; may raise Cancelled to stop.
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class ModelInfo:
    """What the sidebar shows about a loaded model, and what cache keys are made of.

    Attributes:
        name: A short display name (e.g. ``SmolLM2-135M-Instruct``).
        source: Where it came from: a file path, a directory, a hub id or a server URL.
        kind: ``lm``, ``remote-lm`` or ``embedder``.
        parameters: Parameter count (0 when unknown, e.g. a remote model).
        device: ``cuda:0``, ``mps``, ``cpu`` or ``remote``.
        dtype: ``float32``, ``bfloat16``, ``float16`` or ``remote``.
        fingerprint: Identifies the weights exactly (hash of the weight file(s) or of the
            server URL + model name); part of every cache key.
        context_length: The model's maximum context in tokens (None when unknown).
    """

    name: str
    source: str
    kind: str
    parameters: int
    device: str
    dtype: str
    fingerprint: str
    context_length: int | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable form."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class TokenScores:
    """Per-token negative log-likelihoods of a text under a causal LM.

    Attributes:
        starts: Character offset of each token's first character (int64, ascending).
        ends: Character offset just past each token's last character (int64).
        nll: NLL of each token given everything before it (float64, natural log);
            ``nan`` for the first token, which has no context.
        window: The context window (tokens) the scores were computed with.
    """

    starts: np.ndarray
    ends: np.ndarray
    nll: np.ndarray
    window: int

    def __len__(self) -> int:
        return int(self.nll.shape[0])

    def span_stats(self, spans: Sequence[tuple[int, int]]) -> list[tuple[float, int]]:
        """Mean NLL and count of the scored tokens whose first character lies in each span.

        A span with no scored token gets ``(nan, 0)``.
        """
        out = []
        scored = ~np.isnan(self.nll)
        for a, b in spans:
            lo = int(np.searchsorted(self.starts, a, side="left"))
            hi = int(np.searchsorted(self.starts, b, side="left"))
            mask = scored[lo:hi]
            n = int(mask.sum())
            out.append((float(self.nll[lo:hi][mask].mean()) if n else float("nan"), n))
        return out


class Scorer(Protocol):
    """A causal LM that scores text (local or remote)."""

    info: ModelInfo

    def token_nll(
        self, text: str, *, window: int | None = None, progress: Progress | None = None
    ) -> TokenScores:
        """Score every token of ``text`` once, with as much preceding context as fits in ``window``."""

    def conditional_nll(
        self, pairs: Sequence[tuple[str, str]], *, progress: Progress | None = None
    ) -> list[float]:
        """Mean NLL of each continuation q given its context d (d and q tokenized separately)."""

    def next_token_probs(self, prompt: str | list[dict[str, str]], candidates: Sequence[str]) -> dict[str, float]:
        """Probability of each candidate string's first token as the next token after ``prompt``.

        A list of chat messages is rendered with the model's chat template (generation prompt added).
        """


@dataclass
class CancelToken:
    """Set from a UI thread, checked by the computation between batches."""

    _event: threading.Event = field(default_factory=threading.Event)

    def cancel(self) -> None:
        """Ask the computation to stop at its next check."""
        self._event.set()

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._event.is_set()

    def check(self) -> None:
        """Raise :class:`Cancelled` if cancelled."""
        if self._event.is_set():
            raise Cancelled("cancelled")


class ProgressTracker:
    """Turns ``(done, total)`` calls into a fraction and an ETA, and honours a :class:`CancelToken`.

    Usable as a :data:`Progress` callback: ``tracker(done, total)``.
    """

    def __init__(self, report: Callable[[float, float | None, str], None] | None = None,
                 cancel: CancelToken | None = None) -> None:
        self._report = report
        self._cancel = cancel
        self._t0 = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        if self._cancel is not None:
            self._cancel.check()
        if self._report is None or total <= 0:
            return
        frac = min(1.0, done / total)
        elapsed = time.perf_counter() - self._t0
        eta = elapsed * (1 - frac) / frac if frac > 0 else None
        label = f"{done:,}/{total:,}" + (f" · ETA {eta:.0f}s" if eta is not None else "")
        self._report(frac, eta, label)
