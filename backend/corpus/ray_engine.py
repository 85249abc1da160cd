"""The Ray engine of corpus runs: documents as Ray tasks, each model in an actor that holds it.

Why Ray: a team that has a cluster for GPU work most often runs Ray on it (or can start one with
``ray start``), and Ray already does what a corpus run needs — scheduling tasks on the nodes that
have room, actors that keep a model loaded across tasks, GPUs as a resource, object transfer, and
cancelling. A pool of our own would re-implement all of that; Dask has tasks but no stateful actor
per GPU of its own.

How a run goes (:meth:`RayEngine.run`):

- **Ray.** ``address`` (or ``RAY_ADDRESS``, which :func:`~backend.corpus.engine.make_engine`
  passes) joins that cluster; without one a local Ray is started (``num_cpus``: ``workers``, else
  this machine's cores) and shut down at the end. A Ray the caller had already initialized is
  used and left running. The job's runtime environment (:func:`runtime_env`) gives the workers
  the ``CHUNKLAB_*``, ``HF_*``, ``OPENAI_*``, ``TRANSFORMERS_*`` and ``*_OFFLINE`` variables of the
  driver and its torch thread count, and the code: on a cluster Ray ships the ``backend`` package
  (``py_modules``), so a node needs the Python environment (the project's dependencies) but not
  the checkout; a local Ray's workers import the driver's checkout (``PYTHONPATH``).
- **Models in actors.** One actor per model holds it for the whole run: a scorer actor for the
  language model when a metric (BC, CS) or a configuration's chunker needs it, an embedder actor
  when DS, retrieval or a semantic chunker needs it. On a cluster with GPUs every GPU gets one
  actor of each model needed (sharing the GPU between them); without GPUs each model gets
  ``cpu_actors`` CPU actors (default 1: on CPU a model's forward passes already use its torch
  threads, and a second copy doubles its memory for no gain on a small machine). The remote
  scorer or embedder (``--lm remote``, ``--embedder remote``) gets no actor: its server is
  already the pool, and every task talks to it directly.
- **Documents as tasks.** The driver reads each file and sends its bytes, so a worker on another
  machine needs no shared disk; at most ``workers`` tasks are in flight (default: the cluster's
  CPUs not reserved by model actors, at least 1). Each task runs
  :func:`~backend.corpus.work.document_rows` (the function the local engine runs) with stand-ins
  for the models that forward every call to the actors, wrapped in a
  :class:`~backend.corpus.work.CountedContext`, so the numbers are the local engine's and every
  row says what it cost.
- **The output cache is written through the driver.** A task reads the driver's cache folder
  when it can see it (same machine or a shared disk; read-only, as a fallback of a cache in the
  task's own temporary folder), records the entries it computes, and returns them with its rows;
  the driver stores them (:meth:`~backend.models.cache.OutputCache.put`) just before it writes
  the rows. One writer keeps the cache's size accounting and eviction in one process, rows and
  their model outputs land together (a resumed run finds both), and a cluster needs no shared
  filesystem.
- **Retrieval's Chroma store** is private to each worker process (an embedded store in a
  temporary folder): a persistent Chroma folder is not safe to open from several processes.
  Every collection is keyed by document and configuration, so the numbers do not depend on the
  store a document was indexed into.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.chunkers import config_needs
from backend.chunking import ConfigEntry
from backend.config import torch_threads
from backend.corpus.inputs import CorpusFile
from backend.corpus.spec import CorpusSpec
from backend.corpus.work import CountedContext, DocumentOutcome, Unit, WorkCounts, document_rows
from backend.errors import Cancelled, ChunkLabError, ModelError, ParameterError
from backend.metrics.report import model_needs
from backend.models.cache import Key, OutputCache, default_cache
from backend.models.embedder import load_embedder, resolve_embedder_spec
from backend.models.remote import is_remote_lm
from backend.models.remote_embedder import is_remote_embedder
from backend.models.scorer import load_scorer
from backend.models.types import ModelInfo, TokenScores
from backend.progress import Progress
from backend.retrieval.store import ChunkStore, open_store

__all__ = [
    "RayEngine", "ModelActors", "EmbedderActor", "ScorerActor", "TaskResult", "ray_session", "runtime_env", "worker_env",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
BACKEND_DIR = REPO_ROOT / "backend"
SHIP_EXCLUDES = ("__pycache__/", "*.pyc")  # what of the package Ray does not upload (gitignore patterns)
ENV_PREFIXES = ("CHUNKLAB_", "HF_", "OPENAI_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_")
WAIT_SECONDS = 0.5  # how often the driver checks for a cancel while documents run
CONNECT_SECONDS = 5.0  # how long the address may take to accept a connection (Ray itself retries for minutes)


def worker_env() -> dict[str, str]:
    """The environment the Ray workers get: ``PYTHONPATH`` to this checkout and the driver's model settings.

    ``CHUNKLAB_TORCH_THREADS`` is the driver's thread count, set explicitly (its default depends on the
    cores a process may use, which Ray narrows for its workers): the same threads, the same numbers.
    """
    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES) or k.endswith("_OFFLINE")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env["CHUNKLAB_TORCH_THREADS"] = str(torch_threads())
    return env


def runtime_env(address: str | None) -> dict[str, Any]:
    """The Ray runtime environment of a run's workers: :func:`worker_env`, and on a cluster the code.

    Joining a cluster (``address``), the ``backend`` package travels with the job as Ray's
    ``py_modules``: Ray zips it, uploads it to the cluster once per content, and puts it on every
    worker's path ahead of ``PYTHONPATH``, so a node without the checkout runs this code. Only the
    package goes (about 2 MB, ``__pycache__`` left out): a ``working_dir`` of the checkout would
    carry ``.venv``, data and caches, over Ray's upload limit. The third-party packages (torch,
    transformers, the bundled models' wheels) must be installed on every node, as for any Ray job.
    Ray itself puts the driver's working directory ahead of the package: a node that holds another
    copy of the project at that very path imports that copy, so keep such copies in step or remove
    them. A local Ray's workers see the checkout itself, so nothing is uploaded.

    Args:
        address: The cluster the run joins; None for a local Ray.
    """
    env: dict[str, Any] = {"env_vars": worker_env()}
    if address:
        env |= {"py_modules": [str(BACKEND_DIR)], "excludes": list(SHIP_EXCLUDES)}
    return env


# --- the actors: one model each ---------------------------------------------------------------


class ScorerActor:
    """Holds one language model (:func:`~backend.models.scorer.load_scorer`) and scores for every task.

    A load failure is kept and raised by :meth:`describe`, so the driver reports the model's own
    one-line error instead of a dead actor.
    """

    def __init__(self, lm: str | None, device: str | None) -> None:
        self._error: ChunkLabError | None = None
        try:
            self._scorer = load_scorer(lm, device)
        except ChunkLabError as e:
            self._error = e

    def describe(self) -> ModelInfo:
        """The model's identity (raises the load error, if any)."""
        if self._error is not None:
            raise self._error
        return self._scorer.info

    def token_nll(self, text: str, window: int | None) -> TokenScores:
        """Per-token NLLs of ``text``."""
        return self._scorer.token_nll(text, window=window)

    def conditional_nll(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Mean NLL of each pair's continuation given its context."""
        return self._scorer.conditional_nll(pairs)

    def next_token_probs(self, prompt: str | list[dict[str, str]], candidates: Sequence[str]) -> dict[str, float]:
        """Probability of each candidate's first token after ``prompt``."""
        return self._scorer.next_token_probs(prompt, candidates)


class EmbedderActor:
    """Holds one embedder (:func:`~backend.models.embedder.load_embedder`) and embeds for every task."""

    def __init__(self, spec: str | None, device: str | None) -> None:
        self._error: ChunkLabError | None = None
        try:
            self._embedder = load_embedder(spec, device)
        except ChunkLabError as e:
            self._error = e

    def describe(self) -> tuple[ModelInfo, int]:
        """The embedder's identity and vector length (raises the load error, if any)."""
        if self._error is not None:
            raise self._error
        return self._embedder.info, int(self._embedder.dimension)

    def embed(self, texts: list[str]) -> Any:
        """L2-normalized float32 vectors of ``texts``."""
        return self._embedder.embed(texts)

    def input_keys(self, texts: list[str]) -> list[bytes]:
        """What the model reads of each text (see :meth:`~backend.models.embedder.Embedder.input_keys`)."""
        return self._embedder.input_keys(texts)


@dataclass(frozen=True)
class ModelActors:
    """The actors of a run and the models' identities (known once, so a task asks the actors only to compute).

    Attributes:
        scorers: Scorer actors (empty: no language model, or the remote scorer).
        scorer_info: Their model's identity.
        embedders: Embedder actors (empty: no embedder, or the remote one).
        embedder_info: Their model's identity.
        embedder_dimension: Its vector length.
    """

    scorers: tuple[Any, ...] = ()
    scorer_info: ModelInfo | None = None
    embedders: tuple[Any, ...] = ()
    embedder_info: ModelInfo | None = None
    embedder_dimension: int = 0

    def pick(self, i: int) -> ModelActors:
        """The actors the ``i``-th task uses: one of each model, in turn."""
        return ModelActors(
            scorers=(self.scorers[i % len(self.scorers)],) if self.scorers else (),
            scorer_info=self.scorer_info,
            embedders=(self.embedders[i % len(self.embedders)],) if self.embedders else (),
            embedder_info=self.embedder_info,
            embedder_dimension=self.embedder_dimension,
        )


class _ActorScorer:
    """A scorer whose every call is answered by a scorer actor (what a task's context holds)."""

    def __init__(self, actor: Any, info: ModelInfo) -> None:
        self._actor = actor
        self.info = info

    def token_nll(self, text: str, *, window: int | None = None, progress: Progress | None = None) -> TokenScores:
        return _answer(self._actor.token_nll.remote(text, window))

    def conditional_nll(self, pairs: Sequence[tuple[str, str]], *, progress: Progress | None = None) -> list[float]:
        return _answer(self._actor.conditional_nll.remote(list(pairs)))

    def next_token_probs(self, prompt: str | list[dict[str, str]], candidates: Sequence[str]) -> dict[str, float]:
        return _answer(self._actor.next_token_probs.remote(prompt, list(candidates)))


class _ActorEmbedder:
    """An embedder whose every call is answered by an embedder actor."""

    def __init__(self, actor: Any, info: ModelInfo, dimension: int) -> None:
        self._actor = actor
        self.info = info
        self.dimension = dimension

    def embed(self, texts: Sequence[str], *, batch_size: int | None = None, progress: Progress | None = None) -> Any:
        vectors = _answer(self._actor.embed.remote(list(texts)))
        if progress is not None:
            progress(len(texts), len(texts))
        return vectors

    def input_keys(self, texts: Sequence[str]) -> list[bytes]:
        return _answer(self._actor.input_keys.remote(list(texts)))


def _answer(ref: Any) -> Any:
    """``ray.get(ref)``, with a Chunk Lab error raised in the actor raised here as itself."""
    import ray
    import ray.exceptions

    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        if isinstance(e.cause, ChunkLabError):
            raise e.cause from None
        raise ModelError(f"a model actor failed: {_one_line(e.cause or e)}") from None
    except ray.exceptions.RayActorError as e:
        raise ModelError(f"a model actor died ({_one_line(e)})") from None


def _check_reachable(address: str) -> None:
    """Raise :class:`ConnectionError` at once when ``address`` (``host:port`` or ``ray://host:port``) accepts no connection.

    An address with no port (``auto``) is left to Ray.
    """
    host, sep, port = address.split("://", 1)[-1].rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as e:
        raise ConnectionError(f"nothing answers there ({e.strerror or e})") from None


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[-1][:300] if text else type(e).__name__


# --- the task: one document -------------------------------------------------------------------


class RecordingCache(OutputCache):
    """A task's output cache: reads its own folder, then the driver's (read-only); records what it stores.

    The recorded entries go back to the driver with the document's rows, and the driver stores them in
    its cache: the only writer of that folder.
    """

    def __init__(self, directory: Path, max_bytes: int, fallback_dirs: Sequence[Path]) -> None:
        super().__init__(directory, max_bytes, fallback_dirs=fallback_dirs)
        self.recorded: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def put(self, key: Key, value: Mapping[str, Any]) -> None:
        """Store in the task's folder (later lookups of this task hit) and record for the driver."""
        super().put(key, value)
        self.recorded.append((dict(key), dict(value)))


@dataclass(frozen=True)
class TaskResult:
    """What a document's task returns to the driver.

    Attributes:
        outcome: Its rows, or why it gave none.
        counts: The model work it did (:meth:`~backend.corpus.work.WorkCounts.snapshot`).
        entries: ``(key, value)`` of every output-cache entry it computed, for the driver to store.
        node: The Ray node it ran on.
    """

    outcome: DocumentOutcome
    counts: dict[str, int]
    entries: tuple[tuple[dict[str, Any], dict[str, Any]], ...] = ()
    node: str = ""


_worker_store: ChunkStore | None = None


def _private_store() -> ChunkStore:
    """This worker process's own embedded Chroma store, in a temporary folder removed when the process exits."""
    global _worker_store
    if _worker_store is None:
        folder = tempfile.mkdtemp(prefix="chunklab-ray-chroma-")
        atexit.register(shutil.rmtree, folder, True)
        _worker_store = open_store(folder)
    return _worker_store


def run_document(file: CorpusFile, data: bytes | None, spec: CorpusSpec, configs: tuple[ConfigEntry, ...],
                 actors: ModelActors, cache_dirs: tuple[str, ...], cache_bytes: int) -> TaskResult:
    """One document's rows with the models in ``actors`` (the body of a Ray task; runs in a worker).

    Args:
        file: The document.
        data: Its bytes, read by the driver (None: the driver could not read it; the path is tried here).
        spec: The run's spec.
        configs: The configurations still to run on it.
        actors: The model actors to use (none for a model: loaded here if needed, or the remote one).
        cache_dirs: The driver's cache folders, read when this machine sees them.
        cache_bytes: The driver's cache bound.
    """
    with tempfile.TemporaryDirectory(prefix="chunklab-ray-task-") as tmp:
        cache = RecordingCache(Path(tmp) / "cache", cache_bytes, [Path(d) for d in cache_dirs])
        scorer = _ActorScorer(actors.scorers[0], actors.scorer_info) if actors.scorers and actors.scorer_info else None
        embedder = (_ActorEmbedder(actors.embedders[0], actors.embedder_info, actors.embedder_dimension)
                    if actors.embedders and actors.embedder_info else None)
        context = CountedContext(scorer=scorer, lm=spec.lm, device=spec.device, embedder=embedder,
                                 embedder_spec=spec.embedder, _cache=cache)
        store = _private_store() if "retrieval" in spec.metrics else None
        outcome = document_rows(file, spec, context, cache=cache, store=store, data=data, configs=configs)
        return TaskResult(outcome, context.counts.snapshot(), tuple(cache.recorded), _node_id())


def _node_id() -> str:
    """The Ray node this worker runs on."""
    import ray

    return ray.get_runtime_context().get_node_id()


@functools.cache
def _remote(body: Any) -> Any:
    """``body`` (a function or an actor class) as a Ray task or actor (made once per process)."""
    import ray

    return ray.remote(body)


# --- the engine -------------------------------------------------------------------------------


def _needs(units: Sequence[Unit], spec: CorpusSpec) -> tuple[bool, bool]:
    """Whether the run needs the language model and the embedder (its metrics, and its configurations' chunkers)."""
    metrics = model_needs(spec.quality_metrics)
    configs = {e.config.spec: e.config for u in units for e in u.configs}
    chunkers = {n for c in configs.values() for n in config_needs(c)}
    return (metrics.scorer or "lm" in chunkers,
            metrics.embedder or "retrieval" in spec.metrics or "embedder" in chunkers)


@dataclass
class RayEngine:
    """Documents as Ray tasks, the models in actors (see the module docstring).

    Args:
        address: The Ray cluster to join (``ray://…`` or ``host:port``); None starts a local Ray.
        workers: Documents in flight at once (default: the cluster's CPUs not reserved by model actors).
        cache: The output cache the driver writes (default: the process default).
        cpu_actors: Actors per model when the cluster has no GPU.

    Attributes:
        nodes: After a run, the Ray node each document ran on (by document name).
        plan: After a run, what it used: ``{"workers", "cpus", "gpus", "scorer_actors", "embedder_actors",
            "actor_cpus", "actor_gpus"}``.
    """

    address: str | None = None
    workers: int | None = None
    cache: OutputCache | None = None
    cpu_actors: int = 1
    name: str = "ray"
    nodes: dict[str, str] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ParameterError(f"workers ({self.workers}) must be at least 1")
        if self.cpu_actors < 1:
            raise ParameterError(f"cpu_actors ({self.cpu_actors}) must be at least 1")

    # -- Ray itself --

    def _connect(self) -> bool:
        """Join ``address`` or start a local Ray; True when this engine initialized Ray (and shuts it down)."""
        import ray

        if ray.is_initialized():
            return False
        common = {"runtime_env": runtime_env(self.address), "logging_level": logging.ERROR,
                  "log_to_driver": False, "configure_logging": True}
        try:
            if self.address:
                _check_reachable(self.address)
                ray.init(address=self.address, **common)
            else:
                # "local": a new Ray of our own, never one another user started on this machine.
                ray.init(address="local", num_cpus=self.workers or os.cpu_count() or 1, include_dashboard=False,
                         **common)
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = f"the Ray cluster at {self.address}" if self.address else "a local Ray"
            raise ModelError(f"cannot start or join {where}: {_one_line(e)}") from None
        return True

    def _actors(self, units: Sequence[Unit], spec: CorpusSpec) -> tuple[ModelActors, float]:
        """Start the model actors the run needs; their handles and identities, and the CPUs they reserve."""
        import ray

        need_lm, need_embedder = _needs(units, spec)
        need_lm = need_lm and not is_remote_lm(spec.lm)
        need_embedder = need_embedder and not is_remote_embedder(resolve_embedder_spec(spec.embedder))
        models = int(need_lm) + int(need_embedder)
        resources = ray.cluster_resources()
        cpus, gpus = float(resources.get("CPU", 0)), int(resources.get("GPU", 0))
        on_gpu = gpus >= 1 and not (spec.device or "").startswith(("cpu", "mps"))
        if on_gpu:
            count, options = gpus, {"num_gpus": 1 / max(models, 1), "num_cpus": 0}
            device = spec.device or "cuda"
        else:
            count = self.cpu_actors
            # A CPU actor reserves a core when two stay for the documents' tasks; on a smaller cluster it
            # shares the cores (a task blocked on an actor's answer gives its CPU back to Ray meanwhile).
            options = {"num_cpus": 1 if cpus >= count * models + 2 else 0}
            device = spec.device
        scorers = tuple(_remote(ScorerActor).options(**options).remote(spec.lm, device)
                        for _ in range(count)) if need_lm else ()
        embedders = tuple(_remote(EmbedderActor).options(**options).remote(spec.embedder, device)
                          for _ in range(count)) if need_embedder else ()
        self.plan = {"cpus": cpus, "gpus": gpus, "scorer_actors": len(scorers), "embedder_actors": len(embedders),
                     "actor_cpus": options["num_cpus"], "actor_gpus": options.get("num_gpus", 0)}
        actors = ModelActors(scorers=scorers, embedders=embedders)
        try:
            scorer_info = _answer(scorers[0].describe.remote()) if scorers else None
            embedder_info, dimension = _answer(embedders[0].describe.remote()) if embedders else (None, 0)
        except ChunkLabError:
            self._kill(actors)
            raise
        reserved = options["num_cpus"] * (len(scorers) + len(embedders))
        return ModelActors(scorers, scorer_info, embedders, embedder_info, dimension), reserved

    @staticmethod
    def _kill(actors: ModelActors) -> None:
        import ray

        for actor in (*actors.scorers, *actors.embedders):
            ray.kill(actor)

    # -- the run --

    def run(self, units: Sequence[Unit], spec: CorpusSpec, deliver: Callable[[DocumentOutcome], None], *,
            progress: Progress) -> WorkCounts:
        """Run every unit as a Ray task; deliver each outcome here as it completes.

        Raises:
            ModelError: Ray cannot be started or joined, a model cannot be loaded, or a worker died.
            StoreError: a worker's store fails.
            Cancelled: ``progress`` was cancelled (the documents in flight are cancelled; what was delivered stays).
        """
        import ray

        self.nodes = {}
        cache = self.cache if self.cache is not None else default_cache()
        cache_dirs = tuple(str(d) for d in (cache.directory, *cache.fallback_dirs))
        counts = WorkCounts()
        started = self._connect()
        actors = ModelActors()
        try:
            progress.check()
            actors, reserved = self._actors(units, spec)
            cpus = float(ray.cluster_resources().get("CPU", 1))
            workers = self.workers or max(1, int(cpus - reserved))
            self.plan["workers"] = workers
            spec_ref = ray.put(spec)
            pending = list(enumerate(units))
            pending.reverse()
            in_flight: dict[Any, Unit] = {}
            try:
                while pending or in_flight:
                    progress.check()
                    while pending and len(in_flight) < workers:
                        i, unit = pending.pop()
                        in_flight[self._submit(unit, spec_ref, actors.pick(i), cache_dirs, cache.max_bytes)] = unit
                    done, _ = ray.wait(list(in_flight), num_returns=1, timeout=WAIT_SECONDS)
                    for ref in done:
                        in_flight.pop(ref)
                        result: TaskResult = _answer(ref)
                        for key, value in result.entries:  # the model outputs first: a resumed run finds them
                            cache.put(key, value)
                        counts.add(**result.counts)
                        self.nodes[result.outcome.name] = result.node
                        deliver(result.outcome)
            except (Cancelled, ChunkLabError, KeyboardInterrupt):
                for ref in in_flight:
                    ray.cancel(ref)
                raise
        finally:
            if started:
                ray.shutdown()  # ends the actors and a local Ray with it
            else:
                self._kill(actors)
        return counts

    @staticmethod
    def _submit(unit: Unit, spec_ref: Any, actors: ModelActors, cache_dirs: tuple[str, ...], cache_bytes: int) -> Any:
        """Start ``unit``'s task with the file's bytes (None when the driver cannot read it: the worker tries)."""
        try:
            data: bytes | None = unit.file.path.read_bytes()
        except OSError:
            data = None
        return _remote(run_document).remote(unit.file, data, spec_ref, unit.configs, actors, cache_dirs, cache_bytes)


@contextlib.contextmanager
def ray_session(address: str | None = None, workers: int | None = None) -> Iterator[None]:
    """Ray held for a series of runs (e.g. a tuning study's trials): joined or started once, left at the end.

    A :class:`RayEngine` run inside it finds Ray initialized and uses it, instead of starting and
    stopping a local Ray (or joining the cluster) per run; a Ray the caller had already initialized
    is used and left running.

    Args:
        address: The cluster to join; None starts a local Ray (``workers`` CPUs, default this machine's cores).
        workers: The local Ray's CPUs.

    Raises:
        ModelError: Ray cannot be started or joined.
    """
    import ray

    started = RayEngine(address=address, workers=workers)._connect()
    try:
        yield
    finally:
        if started:
            ray.shutdown()
