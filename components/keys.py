"""Session-state keys: every key that more than one module reads or writes is built here.

A page owns a prefix (``cmp``, ``qual``…); its keys are ``prefix_name``. A key that crosses a
module boundary — a component writes it, a page or another component reads it — is a property
of :class:`PageKeys`, so writer and reader cannot spell it differently (the bug this module
fixes: a model run's failure was stored under ``cmp_lm_results`` and looked up under ``cmp``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PageKeys", "COMPARE", "QUALITY", "RETRIEVAL", "PPL", "BENCHMARK", "MODELS", "DOCUMENT", "QSET"]


@dataclass(frozen=True)
class PageKeys:
    """The session-state keys of one page (or panel), all starting with its prefix."""

    prefix: str

    def __call__(self, name: str) -> str:
        """The page's own key ``prefix_name`` (for keys only this page reads)."""
        return f"{self.prefix}_{name}"

    # Keys of the model-run panel (components.lm_runs), shared by the pages that embed it.
    @property
    def lm_results(self) -> str:
        """{(doc id, models key, config): Chunking or one-line error} of this page's model runs."""
        return self("lm_results")

    @property
    def lm_job(self) -> str:
        return self("lm_job")

    @property
    def lm_run(self) -> str:
        return self("lm_run")

    @property
    def lm_rerun(self) -> str:
        return self("lm_rerun")

    @property
    def lm_cancel(self) -> str:
        return self("lm_cancel")


COMPARE = PageKeys("cmp")
QUALITY = PageKeys("qual")
RETRIEVAL = PageKeys("ret")
PPL = PageKeys("ppl")
BENCHMARK = PageKeys("bm")
MODELS = PageKeys("models")
DOCUMENT = PageKeys("docpage")

# The session's question set (a QuestionSet or None): the Retrieval page saves into it, the Benchmark page runs it.
QSET = RETRIEVAL("qset")
