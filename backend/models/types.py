"""Types shared by the model backend: model identity, token scores, the scorer protocol, progress."""

from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol, Sequence

import numpy as np

from backend.errors import Cancelled

__all__ = [
    "ModelInfo",
    "TokenScores",
    "Scorer",
    "Progress",
    "CancelToken",
    "PartialTokenScores",
    "ProgressTracker",
    "QUEUED",
    "Share",
    "acquired",
    "check_cancel",
    "publish_partial",
    "set_queued",
    "set_unit",
]

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


QUEUED = "queued behind another run"


def set_unit(progress: Progress | None, unit: str) -> None:
    """Tell ``progress`` what its counts count (``tokens``, ``pairs``, ``texts``…); a plain callable ignores it."""
    setter = getattr(progress, "set_unit", None)
    if setter is not None:
        setter(unit)


@dataclass(frozen=True)
class PartialTokenScores:
    """The scores of a scoring pass still running: tokens ``0 … scored-1`` hold their final NLL.

    Attributes:
        scores: Every token's offsets; ``nll`` is final below ``scored`` and ``nan`` from it on.
        scored: How many leading tokens are scored (the windows done so far, in order).
        text: The text being scored ("" when not said), so a viewer draws it on its own document only.
    """

    scores: TokenScores
    scored: int
    text: str = ""

    @property
    def complete(self) -> bool:
        """Whether every token is scored."""
        return self.scored >= len(self.scores)


def publish_partial(progress: Progress | None, value: Any) -> None:
    """Hand ``progress`` a partial result of the running computation (a view; a plain callable ignores it)."""
    publish = getattr(progress, "publish", None)
    if publish is not None:
        publish(value)


def check_cancel(progress: Progress | None) -> None:
    """Raise :class:`~backend.errors.Cancelled` if ``progress`` is a cancelled tracker; report nothing."""
    check = getattr(progress, "check", None)
    if check is not None:
        check()


def set_queued(progress: Progress | None, queued: bool) -> None:
    """Tell ``progress`` that its run waits for a model another run holds (True) or has it now (False).

    A :class:`ProgressTracker` then says :data:`QUEUED` and checks its cancel token; a plain callable ignores it.
    """
    setter = getattr(progress, "set_queued", None)
    if setter is not None:
        setter(queued)


class Share:
    """``progress`` for one share of a count: inner ``(done, total)`` becomes ``base + size * done / total`` of ``total``.

    A scorer call on one group of pairs reports that group's progress as pairs of the whole
    run. Queue states and cancel checks pass through; the unit is the outer count's.
    """

    def __init__(self, progress: Progress, base: int, size: int, total: int) -> None:
        self.progress, self.base, self.size, self.total = progress, base, size, total

    def __call__(self, done: int, total: int) -> None:
        self.progress(self.base + (self.size * min(done, total) // total if total > 0 else 0), self.total)

    def set_queued(self, queued: bool) -> None:
        set_queued(self.progress, queued)

    def publish(self, value: Any) -> None:
        publish_partial(self.progress, value)

    def check(self) -> None:
        check_cancel(self.progress)


@contextmanager
def acquired(lock: Any, progress: Progress | None, poll: float = 0.2) -> Iterator[None]:
    """Hold ``lock`` for the block; while another run holds it, ``progress`` says :data:`QUEUED`.

    The wait polls every ``poll`` seconds, so a cancel (checked by the tracker) ends it.
    """
    if not lock.acquire(blocking=False):
        try:
            set_queued(progress, True)
            while not lock.acquire(timeout=poll):
                set_queued(progress, True)
        finally:
            set_queued(progress, False)
    try:
        yield
    finally:
        lock.release()


class ProgressTracker:
    """Turns ``(done, total)`` calls into a fraction, a label and an ETA, and honours a :class:`CancelToken`.

    Usable as a :data:`Progress` callback: ``tracker(done, total)``. The label says what is
    counted (``"1,234 / 4,152 tokens"``, the unit set with :func:`set_unit`). The ETA comes
    from this count's measured rate: units done since the count began (its first report, or
    the moment the run stopped waiting for a model) over the seconds since then; there is
    none until a unit is done (shown in whole seconds, rounded up). A new count (another unit
    or total) starts a new measurement.
    :meth:`part` gives the callback of part ``k`` of ``parts`` (one per configuration, say):
    the fraction is the parts' share, the label and the ETA are the running part's own.
    While :func:`set_queued` says the run waits for a model, the label is :data:`QUEUED`.

    Args:
        report: ``report(fraction, eta seconds or None, label)``.
        cancel: Checked on every call; raises :class:`~backend.errors.Cancelled` once cancelled.
        clock: Seconds, monotonic (injected by tests).
        partial: ``partial(value)``, given what the computation publishes as it goes
            (:func:`publish_partial`, e.g. a :class:`PartialTokenScores`).
    """

    def __init__(
        self,
        report: Callable[[float, float | None, str], None] | None = None,
        cancel: CancelToken | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        partial: Callable[[Any], None] | None = None,
    ) -> None:
        self._report = report
        self._partial = partial
        self._cancel = cancel
        self._clock = clock
        self._unit = ""
        self._count: tuple[Any, ...] | None = None  # (part, unit, total) of the running count
        self._since = 0.0  # when the running count's rate measurement began
        self._base = 0  # units done at that moment
        self._last: tuple[int, int, tuple[int, int, str] | None] | None = None  # the last (done, total, part)
        self._fraction = 0.0
        self._queued = False

    def set_unit(self, unit: str) -> None:
        """What the following counts count (``tokens``, ``pairs``…)."""
        self._unit = unit

    def publish(self, value: Any) -> None:
        """Pass a partial result to the ``partial`` callback (none: ignored)."""
        if self._partial is not None:
            self._partial(value)

    def check(self) -> None:
        """Raise :class:`~backend.errors.Cancelled` once cancelled."""
        if self._cancel is not None:
            self._cancel.check()

    def set_queued(self, queued: bool) -> None:
        """Waiting for a model another run holds (True), or not any more (False); checks the cancel token."""
        if self._cancel is not None:
            self._cancel.check()
        if queued == self._queued:
            return
        self._queued = queued
        if queued:
            if self._report is not None:
                where = self._part_text(self._last[2]) if self._last is not None else ""
                self._report(self._fraction, None, where + QUEUED)
        else:
            self._count = None  # the rate is measured from now: the wait is not the run's speed
            if self._last is not None:
                done, total, part = self._last
                self._update(done, total, part)

    def part(self, k: int, parts: int, what: str = "part") -> Progress:
        """The callback of part ``k`` (0-based) of ``parts``: the label names it (``"configuration 2 of 3 · …"``)."""
        tracker = self

        class _Part:
            def __call__(self, done: int, total: int) -> None:
                tracker._update(done, total, (k, parts, what))

            def set_unit(self, unit: str) -> None:
                tracker.set_unit(unit)

            def set_queued(self, queued: bool) -> None:
                tracker.set_queued(queued)

            def publish(self, value: Any) -> None:
                tracker.publish(value)

            def check(self) -> None:
                tracker.check()

        return _Part()

    def __call__(self, done: int, total: int) -> None:
        self._update(done, total, None)

    @staticmethod
    def _part_text(part: tuple[int, int, str] | None) -> str:
        return f"{part[2]} {part[0] + 1} of {part[1]} · " if part is not None and part[1] > 1 else ""

    def _update(self, done: int, total: int, part: tuple[int, int, str] | None) -> None:
        if self._cancel is not None:
            self._cancel.check()
        if total <= 0:
            return
        done = int(min(max(done, 0), total))
        self._last = (done, total, part)
        now = self._clock()
        count = (part, self._unit, total)
        if count != self._count or done < self._base:
            self._count, self._since, self._base = count, now, done
        frac = done / total
        if part is not None and part[1] > 1:
            frac = (part[0] + frac) / part[1]
        self._fraction = frac
        if self._report is None or self._queued:
            return
        elapsed = now - self._since
        eta = None
        if done < total and done > self._base and elapsed > 0:
            eta = (total - done) * elapsed / (done - self._base)
        unit = f" {self._unit}" if self._unit else ""
        label = f"{self._part_text(part)}{done:,} / {total:,}{unit}"
        if eta is not None:
            label += f" · ETA {math.ceil(eta)}s" + (" for this one" if part is not None and part[1] > 1 else "")
        self._report(frac, eta, label)
