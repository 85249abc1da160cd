"""A background job's plan: what it computes (its signature), its title, the models it loads and its body.

Every task of :mod:`backend.lab` that needs a model run returns a :class:`JobPlan` instead of
starting anything: the page shows its title and cost, compares its signature with the job it
already holds (the same work: show that job; other work: supersede it), and calls
:meth:`JobPlan.start` on a click. The CLI runs the same body in its own thread of control with
:meth:`JobPlan.run`. So a job's signature is built in one place, by the task that knows what
the job computes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Hashable, Mapping

from backend.errors import NotCached
from backend.jobs import Job, start_job
from backend.lab.models import SessionModels
from backend.models.types import Scorer
from backend.models.usage import model_use
from backend.progress import Progress

__all__ = ["JobPlan"]


@dataclass(frozen=True)
class JobPlan:
    """A background job not started yet.

    Attributes:
        title: What it does, for its progress line (``Scoring A, B with SmolLM2``).
        signature: What it computes (document, models, configurations, settings…): equal
            signatures mean the same work, so a page keeps showing the job it already started.
        body: ``body(scorer, progress)``, run in the job's thread; ``scorer`` is the language
            model when :attr:`models` is given (loaded there if the session has none), else None.
        models: The session's models when the job needs the language model, else None.
        model: What the job's card names as the model it runs ("" : the language model's label).
        from_cache: Reads the whole answer from the output cache with no model call, or raises
            :class:`~backend.errors.NotCached`; :meth:`start` tries it first, in the caller's
            thread, and gives a finished job when it answers (shown like a computed one).
        meta: What else the started job keeps in its ``meta`` for the pages that show it (the
            query and k of a search, the tags and colours of a benchmark).
    """

    title: str
    signature: Hashable
    body: Callable[[Scorer | None, Progress], Any] = field(compare=False, repr=False)
    models: SessionModels | None = None
    model: str = ""
    from_cache: Callable[[], Any] | None = field(default=None, compare=False, repr=False)
    meta: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), compare=False, repr=False)

    @property
    def needs_lm(self) -> bool:
        """Whether the job loads the language model."""
        return self.models is not None

    def run(self, progress: Progress, on_model_loaded: Callable[[], None] | None = None) -> Any:
        """Run the body here and now (a job's thread, or the CLI): load the model if needed, then compute.

        While it loads and computes, :func:`~backend.models.usage.lm_status` counts the model as in
        use by a job (the sidebar says so).
        """
        if self.models is None:
            return self.body(None, progress)
        progress.check()  # honours a cancel before the model loads
        models = self.models
        loading = models.scorer is None
        # The model is loaded and used in this thread, outside the session: the pages learn it from here.
        with model_use(models.name, models.fingerprint, default=models.default, loading=loading) as use:
            scorer = models.job_scorer(progress)
            use.loaded(scorer.info)
            if loading and on_model_loaded is not None:
                on_model_loaded()
            return self.body(scorer, progress)

    def start(self, on_model_loaded: Callable[[], None] | None = None) -> Job:
        """Start the job in a background thread; ``on_model_loaded()`` runs there once a model it loaded is ready."""
        if self.from_cache is not None:
            try:
                result = self.from_cache()
            except NotCached:
                pass
            else:
                return Job(self.title, {**self.meta, "signature": self.signature}, state="done", fraction=1.0,
                           label="from the cache", result=result)
        model = self.model or (self.models.label if self.models is not None else "")
        return start_job(
            self.title, lambda progress: self.run(progress, on_model_loaded), **self.meta, signature=self.signature,
            model=model,
        )
