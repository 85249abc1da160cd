"""Background work with progress, cancel and a result: one thread per :class:`Job`, polled by its caller.

A caller (a Streamlit page, a test, a script) starts ``fn(progress)`` with :func:`start_job`
and reads the job's plain fields — ``state``, ``fraction``, ``label``, ``result``, ``error`` —
whenever it likes; the thread only writes them. :meth:`Job.cancel` sets the job's
:class:`~backend.progress.CancelToken`, and the computation stops at its next progress
report (its :class:`~backend.progress.Progress` raises :class:`~backend.errors.Cancelled`
there). A failure ends the job with a one-line message, never a traceback on the caller's side.

:meth:`Progress.part <backend.progress.Progress.part>` splits one job's progress bar between
several parts (one per chunker configuration, say); each part's label keeps its own unit
(tokens, pairs…) and ETA. A job waiting for a model that another run holds says so
(``queued behind another run``, see :func:`~backend.progress.acquired`).
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

from backend.errors import Cancelled, ChunkLabError, one_line
from backend.progress import CancelToken, Progress

__all__ = ["Job", "start_job", "running_jobs"]

_log = logging.getLogger(__name__)

# Every job started in this process, for as long as someone holds it (see running_jobs).
# A running job is held by its thread, so none that runs is missed. (Job is a dataclass: not hashable.)
_STARTED: weakref.WeakValueDictionary[int, Job] = weakref.WeakValueDictionary()


@dataclass
class Job:
    """A computation running in a background thread, polled by its caller.

    Attributes:
        title: What it does, for the progress line.
        meta: What it was started on (document id, model fingerprint…), for the caller.
        state: ``running``, ``done``, ``cancelled`` or ``failed``.
        fraction: Progress in ``[0, 1]``.
        label: Progress text (``1,234 / 4,152 tokens · ETA 40s``, or ``queued behind another run``).
        result: The computation's return value once ``done``.
        error: The one-line message once ``failed``.
        seconds: Wall time once ended.
        partial: The latest partial result the computation published while running
            (:meth:`Progress.publish <backend.progress.Progress.publish>`; e.g. the token scores of the
            windows scored so far), or None. A view for the caller: :attr:`result` is the answer.
    """

    title: str
    meta: dict[str, Any] = field(default_factory=dict)
    state: str = "running"
    fraction: float = 0.0
    label: str = "starting…"
    result: Any = None
    error: str | None = None
    seconds: float = 0.0
    partial: Any = None
    cancel_token: CancelToken = field(default_factory=CancelToken, repr=False)
    started: float = field(default_factory=time.perf_counter, repr=False)
    thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        """Whether the computation has not ended yet."""
        return self.state == "running"

    def cancel(self) -> None:
        """Ask the computation to stop at its next progress report."""
        self.cancel_token.cancel()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the thread ends (tests, the CLI); whether it did."""
        if self.thread is not None:
            self.thread.join(timeout)
        return not self.running

    def _report(self, fraction: float, eta: float | None, label: str) -> None:
        """The root :class:`Progress`'s report: remember where the computation is."""
        self.fraction, self.label = fraction, label

    def _publish(self, value: Any) -> None:
        """The root :class:`Progress`'s partial callback: keep the latest partial result (one reference swap)."""
        self.partial = value

    def _run(self, fn: Callable[[Progress], Any]) -> None:
        """The thread's body: run ``fn`` and record how it ended."""
        try:
            result = fn(Progress(self._report, self.cancel_token, partial=self._publish))
        except Cancelled:
            state, result, error = "cancelled", None, None
        except ChunkLabError as e:
            state, result, error = "failed", None, one_line(str(e))
        except Exception as e:  # the thread's end is the only place left to report it
            _log.exception("%s failed", self.title)
            state, result, error = "failed", None, one_line(f"{type(e).__name__}: {e}")
        else:
            error = None
            state = "done"
        self.seconds = time.perf_counter() - self.started
        self.result, self.error = result, error
        self.state = state  # last: readers that see the end see its result too


# Imported in the caller's thread before a job starts (see start_job).
_PRE_IMPORTED = ("PIL.Image",)


def start_job(title: str, fn: Callable[[Progress], Any], **meta: Any) -> Job:
    """Run ``fn(progress)`` in a daemon thread; ``progress`` raises ``Cancelled`` after :meth:`Job.cancel`.

    ``fn`` runs outside the caller's thread: in the app it must not call Streamlit.

    Python's import lock is per module: a job importing a module that the caller's thread is
    importing at the same moment can be handed the partially initialized module ("module
    'PIL.Image' has no attribute 'Image'", seen in the page tests, where a page draws a
    figure while a job loads a model that imports PIL too). The shared heavy modules in
    ``_PRE_IMPORTED`` are therefore imported here first, in the caller's thread.

    Args:
        title: What the job does, for the progress line and the log.
        fn: The computation; its return value becomes :attr:`Job.result`.
        **meta: What it is started on, kept in :attr:`Job.meta` for the caller.

    Returns:
        The running job.
    """
    for name in _PRE_IMPORTED:
        importlib.import_module(name)
    job = Job(title, meta)
    job.thread = threading.Thread(target=job._run, args=(fn,), name=f"chunklab-job: {title}", daemon=True)
    _STARTED[id(job)] = job
    job.thread.start()
    return job


def running_jobs() -> list[Job]:
    """The jobs of this process that have not ended (a shutdown cancels them; tests end their own)."""
    return [job for job in list(_STARTED.values()) if job.running]
