"""Session-state keys: every key that more than one module reads or writes is built here.

A page owns a prefix (``cmp``, ``qual``…); its keys are ``prefix_name``. A key that crosses a
module boundary — a component writes it, a page or another component reads it — is a property
of :class:`PageKeys`, so writer and reader cannot spell it differently (the bug this module
fixes: a model run's failure was stored under ``cmp_lm_results`` and looked up under ``cmp``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "PageKeys",
    "COMPARE",
    "QUALITY",
    "RETRIEVAL",
    "PPL",
    "BENCHMARK",
    "MODELS",
    "DOCUMENT",
    "SESSION",
    "SUMMARY",
    "EDIT",
    "CORPUS",
    "CORPUS_JOB",
    "TUNE",
    "TUNE_JOB",
    "TUNE_RESULT",
    "TUNE_OPENED",
    "EDIT_STATES",
    "EDIT_OPEN",
    "QUALITY_STORE",
    "QUALITY_THROUGHPUT",
    "BENCHMARK_JOB",
    "SUMMARY_SHOWN",
    "DEMO_MODE",
    "DEMO_ON",
    "DOC",
    "DOC_VERSION",
    "CONFIGS",
    "NEXT_UID",
    "ROUTED",
    "LEGACY_RERUN",
    "LM_CHOICE",
    "LM_INFO",
    "SIDEBAR_LM",
    "LM_PRECISION",
    "EMB_CHOICE",
    "EMB_INFO",
    "CHAT_CHOICE",
    "CHAT_KEY",
    "REMOTE_SCORER",
    "QSET",
    "CACHE_PROBLEM_SHOWN",
]


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
        """The model-run panel's job of the language model's configurations (``group_job("lm")``)."""
        return self("lm_job")

    @property
    def lm_run(self) -> str:
        """The panel's "Run with <model>" button."""
        return self("lm_run")

    @property
    def lm_rerun(self) -> str:
        """The panel's "run again" button (results missing after a run)."""
        return self("lm_rerun")

    @property
    def lm_cancel(self) -> str:
        """The Cancel button of the panel's job."""
        return self("lm_cancel")

    # One job per model group (backend.lab.runs.model_group: lm, embedder, chat); the lm group's keys are the above.
    def group_job(self, group: str) -> str:
        """The model-run panel's job of model group ``group``."""
        return self(f"{group}_job")

    def group_run(self, group: str) -> str:
        """The "Run with <model>" button of ``group``'s job."""
        return self(f"{group}_run")

    def group_rerun(self, group: str) -> str:
        """The "run again" button of ``group``'s job."""
        return self(f"{group}_rerun")

    def group_cancel(self, group: str) -> str:
        """The Cancel button of ``group``'s job."""
        return self(f"{group}_cancel")


COMPARE = PageKeys("cmp")
QUALITY = PageKeys("qual")
RETRIEVAL = PageKeys("ret")
PPL = PageKeys("ppl")
BENCHMARK = PageKeys("bm")
MODELS = PageKeys("models")
DOCUMENT = PageKeys("docpage")
SESSION = PageKeys("ses")  # the sidebar's Save / Open session panel (components.session)
SUMMARY = PageKeys("sum")
EDIT = PageKeys("edit")  # the Edit page (pages/edit.py) and its metrics panel (components/edit_metrics.py)
CORPUS = PageKeys("corpus")  # the Corpus page (pages/corpus.py, components/corpus.py)
TUNE = PageKeys("tune")  # the Tune page (pages/tune.py, components/tune.py)

# Results the Summary page reads from the pages that compute them (and adds to, so those pages show them too).
QUALITY_STORE = QUALITY("store")  # {"doc": doc id, table_key or vectors_key: PairTable or vectors} (pages/quality.py)
QUALITY_THROUGHPUT = QUALITY("throughput")  # the Throughput measured on this session's last scoring job
CORPUS_JOB = CORPUS("job")  # the last corpus run's Job; meta: out, configs, resumed, source, engine
TUNE_JOB = TUNE("job")  # the last tuning run's Job; meta: out, resumed (trials found in out before it started)
# The session's tuning result (a TuneResult): the Tune page sets it when a run ends or a folder is opened; the
# Summary shows it and a saved session keeps it (components.session).
TUNE_RESULT = TUNE("result")
TUNE_OPENED = TUNE("opened")  # an earlier run's output folder the Tune page shows (None: its job's); a session clears it
BENCHMARK_JOB = BENCHMARK("job")  # the last benchmark Job; result: BenchmarkRun, meta: tags, colors, qset, qset_name
SUMMARY_SHOWN = SUMMARY("shown")  # the backend.report.summary.Summary the Summary page last drew
EDIT_STATES = EDIT("states")  # {uid: backend.lab.edit.EditState} of the session's edited copies (undo/redo)
EDIT_OPEN = EDIT("open")  # the uid of the edited copy the Edit page shows ("Edit a copy" sets it)
DEMO_MODE = PageKeys("demo")  # demo mode's switch, tour and one-time runs (components.demo)

# Shared by every page, without a prefix: the current document and the configurations
# (components.state), the router's pass (app.py, components.layout).
DOC = "doc"
DOC_VERSION = "doc_version"  # bumped on every document change, so pages can reset windows
CONFIGS = "configs"
NEXT_UID = "configs_next_uid"
ROUTED = "router_pass"  # True while app.py runs the current page
CACHE_PROBLEM_SHOWN = "cache_problem_shown"  # the output cache's write problem this session was told about
LEGACY_RERUN = "router_legacy_rerun"  # this session has rerun once through the router

# The session's models: written by components.models, read by the pages and components.lm_runs.
LM_CHOICE = MODELS("lm_choice")  # ("local", spec or None) or ("remote", None), set once loaded
LM_INFO = MODELS("lm_info")  # the loaded language model's ModelInfo
LM_PRECISION = MODELS("lm_precision_loaded")  # the CPU precision the session's local LM was loaded at (None: default)
EMB_CHOICE = MODELS("emb_choice")  # the loaded embedder's spec (None: the default)
EMB_INFO = MODELS("emb_info")
# The chat model of LLM chunkers: None = the default (an API when OPENAI_* is set, else the bundled
# model), ("local", None) or ("remote", (base_url, model)); the key lives only in CHAT_KEY.
CHAT_CHOICE = MODELS("chat_choice")
CHAT_KEY = MODELS("chat_api_key")
REMOTE_SCORER = MODELS("remote_scorer")  # this session's RemoteScorer (it holds the user's key)
SIDEBAR_LM = MODELS("sidebar_lm")  # the language model's status line the sidebar last drew (job_progress redraws it)

# The session's question set (a QuestionSet or None): the Retrieval page saves into it, the Benchmark page runs it.
QSET = RETRIEVAL("qset")

# Whether this session is in demo mode: set by components.demo, read by the pages that start its runs.
DEMO_ON = DEMO_MODE("on")
