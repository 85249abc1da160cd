"""Progress of long computations: counts, a measured ETA, parts, "queued behind another run" and cancel.

One class, :class:`Progress`, is handed down every call chain that can take long (scoring,
embedding, indexing, benchmarks). The computation calls ``progress(done, total)`` and, when it
knows more, :meth:`~Progress.set_unit`, :meth:`~Progress.set_queued`, :meth:`~Progress.publish`
and :meth:`~Progress.check`. A caller that splits its work hands each step a child —
:meth:`~Progress.part` (one share of the bar, with its own count and ETA) or
:meth:`~Progress.slice` (a stretch of the parent's own count) — and every child sends its
counts, queued state, partial results and cancel checks to the one root that draws the bar.
A child is a :class:`Progress` too, so a function never asks what it was given.

Only the standard library and :mod:`backend.errors` are imported: every layer may use it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from backend.errors import Cancelled

__all__ = ["CancelToken", "PRIOR_SECONDS", "Progress", "QUEUED", "acquired", "format_seconds"]

QUEUED = "queued behind another run"
# How many seconds of the running count's own measurement a rate measured earlier (:meth:`Progress.expect`)
# is worth: it gives the ETA before a unit is done, and the run's own rate takes over as it goes.
PRIOR_SECONDS = 20.0


def format_seconds(seconds: float) -> str:
    """A duration as a person reads it: ``42 s``, ``about 4 min``, ``1 h 50 min``.

    Below 90 seconds the seconds (rounded up: an ETA never says 0 s), below an hour the
    minutes (rounded), above it hours and minutes rounded to 5 minutes (``2 h``, ``12 h``
    from 10 hours on). The one formatter of durations a user reads
    (:func:`backend.metrics.cost.format_seconds` is this function).

    >>> [format_seconds(s) for s in (0.2, 42, 390, 6600, 40000)]
    ['1 s', '42 s', 'about 7 min', '1 h 50 min', '11 h']
    """
    seconds = max(float(seconds), 0.0)
    if not math.isfinite(seconds):
        return "forever"
    if seconds < 90:
        return f"{max(1, math.ceil(seconds))} s"
    minutes = math.floor(seconds / 60 + 0.5)  # half up, not to even: 6.5 min reads "about 7 min"
    if minutes < 60:
        return f"about {minutes} min"
    if minutes >= 600:
        return f"{math.floor(minutes / 60 + 0.5)} h"
    minutes = 5 * math.floor(minutes / 5 + 0.5)
    hours, rest = divmod(minutes, 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


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


class Progress:
    """Turns ``(done, total)`` calls into a fraction, a label and an ETA, and honours a :class:`CancelToken`.

    The computation calls ``progress(done, total)``. The label says what is counted
    (``"1,234 / 4,152 tokens"``, the unit set with :meth:`set_unit`). The ETA comes from the
    running count's measured rate: work done since the count began (its first report, or the
    moment the run stopped waiting for a model) over the seconds since then, shown in human
    units (:func:`format_seconds`: ``ETA about 4 min``). Work is the units counted, unless the
    computation says what its units weigh: ``progress(done, total, work=(work done, work
    total))`` (tokens read, when pairs or windows differ in length), so a long unit late in the
    run does not make the ETA too short. A rate measured earlier on this machine
    (:meth:`expect`, work per second) gives an ETA before the first unit is done, and is
    blended with the running count's own rate, worth :data:`PRIOR_SECONDS` seconds of it;
    without one there is no ETA until a unit is done. A new count (another unit, total or
    part) starts a new measurement. While :meth:`set_queued` says the run waits for a model,
    the label is :data:`QUEUED`.

    :meth:`part` and :meth:`slice` give children that report to the same bar. A child made by
    :meth:`part` has its own count, unit and ETA, and its label names it
    (``"configuration 2 of 3 · 1,234 / 4,152 tokens · ETA 40s for this one"``); a child made by
    :meth:`slice` moves its parent's count. A subclass may watch what passes through a
    child of its own (the scoring checkpoint keeps the partial results it sees): it builds
    itself with ``super().__init__()`` and then ``self._follow(parent)``.

    Args:
        report: ``report(fraction, eta seconds or None, label)``; None reports nothing.
        cancel: Checked on every count and queued state; :class:`~backend.errors.Cancelled`
            is raised once cancelled.
        clock: Seconds, monotonic (injected by tests).
        partial: ``partial(value)``, given what the computation publishes as it goes
            (:meth:`publish`, e.g. a :class:`~backend.models.types.PartialTokenScores`).
        counts: ``counts(done, total)``, given every count reported to this root as it came
            (also through a :meth:`slice` of it), for tests and scripts that want the numbers.
    """

    def __init__(
        self,
        report: Callable[[float, float | None, str], None] | None = None,
        cancel: CancelToken | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        partial: Callable[[Any], None] | None = None,
        counts: Callable[[int, int], None] | None = None,
    ) -> None:
        self._root = self
        self._parent: Progress | None = None
        # Where this child's fraction lies in its parent's: parent = (offset + width * own) / scale.
        self._place = (0.0, 1.0, 1.0)
        self._share: tuple[int, int, int] | None = None  # a slice's (base, size, total) of the parent's count
        self._work_share: tuple[float, float, float] | None = None  # a slice's (base, size, total) of its work
        # A slice's rate measured before, in its child's measure (:meth:`expect`), and the parent's measure per
        # unit of the child's (known from the child's first count): the parent is told the product.
        self._child_rate: float | None = None
        self._child_scale: float | None = None
        self._own_count = True  # False for a slice or a follower: its counts are its parent's
        self._prefix = ""  # the label's names of the parts down to this one ("configuration 2 of 3 · ")
        self._one_of_several = False  # inside one of several parts: the ETA is "for this one"
        self._unit = ""
        # The root's state (a child reads its root's).
        self._report = report
        self._cancel = cancel
        self._clock = clock
        self._partial = partial
        self._counts = counts
        self._count: tuple[Any, ...] | None = None  # (counting node, unit, total) of the running count
        self._since = 0.0  # when the running count's rate measurement began
        self._base = 0  # units done at that moment
        self._work_base = 0.0  # work done at that moment
        self._expected: float | None = None  # work per second measured earlier (:meth:`expect`) for this count
        self._last: tuple[Progress, int, int, tuple[float, float] | None] | None = None  # the last count and work
        self._fraction = 0.0
        self._queued = False

    # ------------------------------------------------------------------ what a computation calls

    def __call__(self, done: int, total: int, *, work: tuple[float, float] | None = None) -> None:
        """``done`` of ``total`` units; raises :class:`~backend.errors.Cancelled` once cancelled.

        Args:
            done: Units done.
            total: Units in all.
            work: ``(work done, work in all)`` when units differ in weight (e.g. tokens read by
                the pairs done and by all of them); the ETA is measured in it. None: each unit weighs 1.
        """
        parent = self._parent
        if parent is None or self._own_count:
            root = self._root
            root.check()
            if self is root and root._counts is not None:
                root._counts(done, total)
            root._update(self, done, total, work)
        elif self._share is not None:
            base, size, whole = self._share
            self._scale_to_parent(total, work)
            fraction = min(done, total) / total if total > 0 else 0.0
            if work is not None and work[1] > 0:
                fraction = min(max(work[0] / work[1], 0.0), 1.0)  # the child's own weights say how far it is
            outer = None
            if self._work_share is not None:
                w_base, w_size, w_whole = self._work_share
                outer = (w_base + w_size * fraction, w_whole)
            parent(base + (size * min(done, total) // total if total > 0 else 0), whole, work=outer)
        else:
            parent(done, total, work=work)

    def expect(self, work_per_s: float | None) -> None:
        """The rate this count's work ran at when measured before (on this machine, same model); None: unknown.

        The rate is in what this progress's counts measure: their work when they say what they
        weigh (``work=``), else their units. Call it after :meth:`set_unit` (a new unit forgets
        it). It gives the ETA before the first unit is done and steadies it early on (see the
        class docstring).

        A :meth:`slice` turns it into its parent's measure once its child's first count says how
        the two compare: a group of pairs weighed in characters, sliced into a job that counts
        pairs, tells the job ``characters/s × pairs / characters`` of the group — pairs per
        second at the group's mean weight, so the job's ETA is its own remaining pairs at that
        rate, never its pairs divided by a rate in characters.
        """
        rate = float(work_per_s) if work_per_s is not None else None
        rate = rate if rate is not None and math.isfinite(rate) and rate > 0 else None
        if self._parent is not None and not self._own_count:
            if self._share is None:  # a follower counts in its parent's measure
                self._parent.expect(rate)
                return
            self._child_rate = rate
            if rate is None or self._child_scale is not None:
                self._parent.expect(None if rate is None else rate * self._child_scale)
            return
        self._expected = rate

    def set_unit(self, unit: str) -> None:
        """What the following counts count (``tokens``, ``pairs``…); a slice keeps its parent's."""
        if self._parent is None or self._own_count:
            if unit != self._unit:
                self._expected = None  # another kind of work: a rate measured for the last one does not hold
            self._unit = unit
        elif self._share is None:
            self._parent.set_unit(unit)

    def set_queued(self, queued: bool) -> None:
        """Waiting for a model another run holds (True), or not any more (False); checks the cancel token."""
        self._root._set_queued(queued, self._prefix)

    def publish(self, value: Any) -> None:
        """Pass a partial result of the running computation to the root's ``partial`` callback (none: ignored)."""
        if self._root._partial is not None:
            self._root._partial(value)

    def check(self) -> None:
        """Raise :class:`~backend.errors.Cancelled` once cancelled; report nothing."""
        if self._root._cancel is not None:
            self._root._cancel.check()

    @property
    def cancelled(self) -> bool:
        """Whether the run was asked to stop."""
        return self._root._cancel is not None and self._root._cancel.cancelled

    # ------------------------------------------------------------------ children

    def part(self, i: int, n: int, what: str | None = "part", *, weights: Sequence[float] | None = None) -> Progress:
        """The progress of part ``i`` (0-based) of ``n``: its own count, unit and ETA on its share of the bar.

        Args:
            i: Which part.
            n: How many parts share this progress's bar.
            what: What a part is, for the label (``"configuration 2 of 3 · …"``); None names
                no part. One part of one is never named.
            weights: ``n`` non-negative numbers, the parts' shares of the bar (default equal);
                all zero: every part's share is empty.

        Raises:
            ValueError: ``i`` outside ``0 … n-1``, or weights of another length or negative.
        """
        if not 0 <= i < n:
            raise ValueError(f"part {i} of {n}: the part must be in 0 … {n - 1}")
        if weights is None:
            place = (float(i), 1.0, float(n))
        else:
            ws = [float(w) for w in weights]
            if len(ws) != n or any(w < 0 for w in ws):
                raise ValueError(f"weights {list(weights)!r} must be {n} non-negative numbers")
            place = (sum(ws[:i]), ws[i], sum(ws) or 1.0)
        child = Progress()._follow(self, own_count=True)
        child._place = place
        if what is not None and n > 1:
            child._prefix = f"{self._prefix}{what} {i + 1} of {n} · "
        child._one_of_several = self._one_of_several or n > 1
        return child

    def slice(
        self, base: int, size: int, total: int, *, work: tuple[float, float, float] | None = None
    ) -> Progress:
        """A child whose ``(done, t)`` is this progress's ``base + size * done // t`` of ``total``, in its unit.

        A scorer call on one group of pairs reports the group's progress as pairs of the whole run.

        Args:
            base: Units of the whole done before the slice.
            size: Units of the whole the slice covers.
            total: Units of the whole.
            work: ``(work before, the slice's work, work of the whole)``: the slice's counts move the
                whole's work in proportion (see :meth:`__call__`); None: units weigh 1.
        """
        child = Progress()._follow(self, own_count=False)
        child._share = (base, size, total)
        child._work_share = work
        if total > 0:
            child._place = (float(base), float(size), float(total))
        return child

    def _scale_to_parent(self, total: int, work: tuple[float, float] | None) -> None:
        """A slice's side of :meth:`expect`: learn from its child's count how its measure maps onto its parent's."""
        if self._share is None or self._parent is None:
            return
        measure = work[1] if work is not None and work[1] > 0 else float(total)
        ours = self._work_share[1] if self._work_share is not None else float(self._share[1])
        scale = ours / measure if measure > 0 and ours > 0 else None
        if scale == self._child_scale:
            return
        self._child_scale = scale
        if self._child_rate is not None and scale is not None:
            self._parent.expect(self._child_rate * scale)

    def _follow(self, parent: Progress, *, own_count: bool = False) -> Progress:
        """Make this new tracker a child of ``parent``: by default it passes everything through to it."""
        self._root, self._parent = parent._root, parent
        self._own_count = own_count
        self._prefix, self._one_of_several = parent._prefix, parent._one_of_several
        self._unit = parent._unit  # a part counts what its parent counted until it says otherwise
        return self

    # ------------------------------------------------------------------ the root's bookkeeping

    def _fraction_of_bar(self, fraction: float) -> float:
        """``fraction`` of this node's count as a fraction of the root's bar."""
        node = self
        while node._parent is not None:
            offset, width, scale = node._place
            fraction = (offset + width * fraction) / scale
            node = node._parent
        return fraction

    def _set_queued(self, queued: bool, prefix: str) -> None:
        """The root's side of :meth:`set_queued`; ``prefix`` names the waiting part."""
        self.check()
        if queued == self._queued:
            return
        self._queued = queued
        if queued:
            if self._report is not None:
                self._report(self._fraction, None, prefix + QUEUED)
        else:
            self._count = None  # the rate is measured from now: the wait is not the run's speed
            if self._last is not None:
                self._update(*self._last)

    def _update(self, node: Progress, done: int, total: int, work: tuple[float, float] | None = None) -> None:
        """Count ``done`` of ``total`` for ``node`` (a node with a count of its own) and report it."""
        if total <= 0:
            return
        done = int(min(max(done, 0), total))
        work_done, work_total = (float(done), float(total)) if work is None else (float(work[0]), float(work[1]))
        self._last = (node, done, total, work)
        now = self._clock()
        count = (node, node._unit, total)
        if count != self._count or done < self._base:
            self._count, self._since, self._base, self._work_base = count, now, done, work_done
        self._fraction = node._fraction_of_bar(done / total)
        if self._report is None or self._queued:
            return
        eta = None
        if done < total:
            rate = _blended_rate(node._expected, work_done - self._work_base, now - self._since)
            if rate is not None:
                eta = max(work_total - work_done, 0.0) / rate
        unit = f" {node._unit}" if node._unit else ""
        label = f"{node._prefix}{done:,} / {total:,}{unit}"
        if eta is not None:
            label += f" · ETA {format_seconds(eta)}" + (" for this one" if node._one_of_several else "")
        self._report(self._fraction, eta, label)


def _blended_rate(expected: float | None, work: float, elapsed: float) -> float | None:
    """Work per second: the running count's (``work`` in ``elapsed`` s), steadied by the ``expected`` one; None."""
    if expected is not None:
        return (PRIOR_SECONDS * expected + max(work, 0.0)) / (PRIOR_SECONDS + max(elapsed, 0.0))
    if work > 0 and elapsed > 0:
        return work / elapsed
    return None


@contextmanager
def acquired(lock: Any, progress: Progress | None, poll: float = 0.2) -> Iterator[None]:
    """Hold ``lock`` for the block; while another run holds it, ``progress`` says :data:`QUEUED`.

    The wait polls every ``poll`` seconds, so a cancel (checked by :meth:`Progress.set_queued`) ends it.
    """
    progress = progress or Progress()
    if not lock.acquire(blocking=False):
        try:
            progress.set_queued(True)
            while not lock.acquire(timeout=poll):
                progress.set_queued(True)
        finally:
            progress.set_queued(False)
    try:
        yield
    finally:
        lock.release()
