"""The Ray engine on a real two-node Ray cluster started here: the local engine's numbers, written through the driver.

The cluster is two ``ray start`` nodes on this machine (one CPU each, a ``head`` and a ``node2``
resource), each started with ``--block`` in its own process group and stopped by signalling that
group (``ray stop`` would stop every Ray on the machine, other users' too).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import ray

from backend.chunkers import make_chunker
from backend.chunking import ChunkerConfig
from backend.corpus.engine import LocalEngine, run_corpus
from backend.corpus.ray_engine import RayEngine, runtime_env, worker_env
from backend.corpus.results import read_results
from backend.corpus.spec import CorpusSpec, tag_configs
from backend.errors import Cancelled, ModelError
from backend.models.cache import OutputCache
from backend.progress import CancelToken, Progress
from tests.conftest import ROOT

SAMPLES = ROOT / "assets" / "samples"
RAY = Path(sys.executable).with_name("ray")
CONFIGS = ("recursive chunk_size=60", "sentence chunk_size=40")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_node(args: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([str(RAY), "start", "--block", "--disable-usage-stats",
                                 f"--dashboard-agent-listen-port={_free_port()}", f"--metrics-export-port={_free_port()}",
                                 *args], stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env=os.environ | {"RAY_AUTH_MODE": "disabled", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"})


def _stop_node(proc: subprocess.Popen) -> None:
    """SIGTERM the node's process group (its ``ray start --block`` drains and stops its processes), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, 40), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        try:  # the leader is gone; a straggler of its group may not be
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return


def _wait_for_head(proc: subprocess.Popen, port: int, log: Path, timeout: float) -> None:
    """Return once the head accepts connections on ``port``; fail with its log's last line if it exits first.

    ``ray.init`` on an address with nothing behind it retries for minutes: a head that died at start-up
    (seen: a socket path over the 107 bytes AF_UNIX allows) would hang the module instead of failing it.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            pytest.fail(f"the Ray head exited ({proc.returncode}): {lines[-1] if lines else 'no output'}")
        with socket.socket() as s:
            s.settimeout(1.0)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    pytest.fail(f"the Ray head accepted no connection on port {port} within {timeout:.0f} s")


def _wait_for_nodes(address: str, count: int, timeout: float) -> dict[str, str]:
    """The alive nodes' ids by their custom resource (``head``, ``node2``), once ``count`` are up."""
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        deadline = time.monotonic() + timeout
        while True:
            alive = [n for n in ray.nodes() if n["Alive"]]
            if len(alive) >= count:
                return {r: n["NodeID"] for n in alive for r in ("head", "node2") if r in n["Resources"]}
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(alive)} of {count} Ray nodes up after {timeout:.0f} s")
            time.sleep(0.5)
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def cluster():
    """A two-node Ray cluster on this machine: ``{"address", "nodes": {"head": id, "node2": id}}``.

    The nodes run without Ray's token authentication (``RAY_AUTH_MODE=disabled``), whatever a token
    left in ``~/.ray`` by another Ray says: this process, which the engine joins from, imported Ray
    before any fixture could give it a token (Ray reads its authentication settings on import).
    Both nodes listen on the loopback address (``--node-ip-address``): Ray would otherwise announce the
    machine's first interface, which a sandbox may not route (CI saw "Failed to connect to Ray cluster
    at 192.0.2.2"). The cluster lives for this module only.
    """
    # Ray's sockets live under --temp-dir, and an AF_UNIX path may not pass 107 bytes: pytest's own
    # temporary folders (…/pytest-163/popen-gw0/ray0/head/session_<date>_<pid>/sockets/plasma_store) do.
    tmp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    port = _free_port()
    address = f"127.0.0.1:{port}"
    procs = []
    try:
        procs.append(_start_node([
            "--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=1", '--resources={"head": 1}', "--include-dashboard=false",
            f"--temp-dir={tmp / 'head'}",
            f"--ray-client-server-port={_free_port()}", f"--dashboard-port={_free_port()}",
            "--object-store-memory=200000000"], tmp / "head.log"))
        _wait_for_head(procs[0], port, tmp / "head.log", timeout=90)
        procs.append(_start_node([
            f"--address={address}", "--node-ip-address=127.0.0.1", "--num-cpus=1", '--resources={"node2": 1}', f"--temp-dir={tmp / 'node2'}",
            "--object-store-memory=200000000"],
            tmp / "node2.log"))
        nodes = _wait_for_nodes(address, 2, timeout=90)
        yield {"address": address, "nodes": nodes}
    finally:
        for proc in reversed(procs):
            _stop_node(proc)
        shutil.rmtree(tmp, ignore_errors=True)


def _config(spec: str):
    name, params, tokenizer = ChunkerConfig.parse(spec)
    return make_chunker(name, params, tokenizer).config


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Three small documents (text, Markdown, HTML from the samples), an unreadable PDF and an unsupported file."""
    root = tmp_path_factory.mktemp("corpus")
    (root / "clockmaker.txt").write_text((SAMPLES / "narrative_clockmaker.txt").read_text(encoding="utf-8")[:700],
                                         encoding="utf-8")
    (root / "notes").mkdir()
    (root / "notes" / "kestrel.md").write_text((SAMPLES / "technical_kestrel.md").read_text(encoding="utf-8")[:800],
                                               encoding="utf-8")
    html = (SAMPLES / "release_notes.html").read_text(encoding="utf-8")
    (root / "release.html").write_text(html[: html.index("</p>", 900) + 4] + "</body></html>", encoding="utf-8")
    (root / "broken.pdf").write_bytes(b"%PDF-1.7\n this is not a PDF body")
    (root / "table.xyz").write_text("a,b\n1,2\n", encoding="utf-8")
    return root


def _spec() -> CorpusSpec:
    return CorpusSpec(configs=tag_configs([_config(c) for c in CONFIGS]), metrics=("stats", "bc", "ds"), pairs=4)


def _numbers(out: Path) -> dict[tuple[str, str], dict]:
    """The rows by (document, tag), ``work`` without its seconds (the only thing an engine may change)."""
    rows = {}
    for r in read_results(out).rows:
        r = dict(r)
        r["work"] = {k: v for k, v in r["work"].items() if not k.endswith("_s")}
        rows[(r["doc"], r["tag"])] = r
    return rows


def test_a_two_node_cluster_gives_the_local_numbers_and_fills_the_cache_through_the_driver(cluster, corpus, tmp_path):
    ray_cache, local_cache = OutputCache(tmp_path / "ray-cache"), OutputCache(tmp_path / "local-cache")
    engine = RayEngine(address=cluster["address"], cache=ray_cache)
    on_ray = run_corpus(corpus, _spec(), tmp_path / "ray", engine=engine)
    assert not ray.is_initialized()  # the engine joined the cluster, and left it
    # The local engine through the CLI, with its own cache folder.
    cli = subprocess.run(
        [sys.executable, "-m", "backend", "corpus", str(corpus), *(a for c in CONFIGS for a in ("--config", c)),
         "--metrics", "stats,bc,ds", "--pairs", "4", "--engine", "local", "--out", str(tmp_path / "local"), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env=os.environ | {"CHUNKLAB_CACHE_DIR": str(local_cache.directory)})
    assert cli.returncode == 0, cli.stderr
    local = json.loads(cli.stdout)

    rows = _numbers(tmp_path / "ray")
    assert rows == _numbers(tmp_path / "local")
    assert sorted(rows) == [(d, t) for d in ("clockmaker.txt", "notes/kestrel.md", "release.html") for t in "AB"]
    assert all(r["bc"] is not None and r["ds"] is not None and "error" not in r for r in rows.values())
    assert on_ray.counts == local["counts"] and on_ray.counts["pairs_scored"] > 0 and on_ray.counts["texts_embedded"] > 0
    assert on_ray.counts["pairs_scored"] == sum(r["work"]["pairs_scored"] for r in rows.values())

    # Files that give no rows are listed with their reason, by both engines.
    skipped = {s["doc"]: s["error"] for s in read_results(tmp_path / "ray").skipped}
    assert skipped == {s["doc"]: s["error"] for s in read_results(tmp_path / "local").skipped}
    assert sorted(skipped) == ["broken.pdf", "table.xyz"]
    assert skipped["broken.pdf"] == (
        "'broken.pdf' is truncated: it lacks the end-of-file marker every complete PDF ends with (\"%%EOF\"); "
        "upload the complete file"
    )
    assert skipped["table.xyz"].startswith("unsupported format ('.xyz'; readable: ")

    # Documents (the broken one too: its task found it unreadable) ran on both nodes; the models on one actor each, reserving no CPU on this 2-CPU cluster.
    assert set(engine.nodes) == {"broken.pdf", "clockmaker.txt", "notes/kestrel.md", "release.html"}
    assert set(engine.nodes.values()) == set(cluster["nodes"].values())
    assert engine.plan == {"cpus": 2.0, "gpus": 0, "scorer_actors": 1, "embedder_actors": 1, "actor_cpus": 0,
                           "actor_gpus": 0, "workers": 2}

    # Written through the driver: the workers' model outputs are in the driver's cache folder, the
    # same entries the local run stored, and a run over that cache computes nothing.
    entries = sorted(p.name for p in ray_cache.directory.iterdir())
    assert entries == sorted(p.name for p in local_cache.directory.iterdir()) and entries
    again = run_corpus(corpus, _spec(), tmp_path / "again",
                       engine=LocalEngine(cache=OutputCache(ray_cache.directory), store_path=tmp_path / "again" / "c"))
    assert again.counts == {"pairs_scored": 0, "tokens_scored": 0, "texts_embedded": 0, "model_calls": 0}
    assert _numbers(tmp_path / "again") == {k: r | {"work": r["work"] | {"pairs_scored": 0, "texts_embedded": 0,
                                                                         "model_calls": 0}}
                                             for k, r in rows.items()}


def test_a_worker_on_another_node_runs_the_backend_package_ray_ships_not_the_checkout(cluster, tmp_path, monkeypatch):
    def where_backend_is() -> str:  # a local function: pickled by value, it needs nothing of the tests on the worker
        import backend.corpus.ray_engine

        return backend.corpus.ray_engine.__file__

    # Ray puts the driver's working directory first on the workers' path: here it holds no checkout,
    # as on a node that has none.
    monkeypatch.chdir(tmp_path)
    address = cluster["address"]
    ray.init(address=address, runtime_env=runtime_env(address), logging_level="ERROR", log_to_driver=False)
    try:
        on_node2 = ray.get(ray.remote(where_backend_is).options(num_cpus=0, resources={"node2": 1}).remote())
    finally:
        ray.shutdown()
    shipped = Path(on_node2)
    assert shipped.parts[-3:] == ("backend", "corpus", "ray_engine.py")
    assert not shipped.is_relative_to(ROOT) and "py_modules_files" in shipped.parts


def test_a_model_that_cannot_load_in_its_actor_stops_the_run_with_its_own_error(cluster, corpus, tmp_path):
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    spec = CorpusSpec(configs=tag_configs([_config(CONFIGS[0])]), metrics=("stats", "ds"), embedder=str(folder))
    with pytest.raises(ModelError, match=f"^cannot load the embedder at {folder}: "):
        run_corpus(corpus, spec, tmp_path / "out", engine=RayEngine(address=cluster["address"],
                                                                    cache=OutputCache(tmp_path / "cache")))
    assert not ray.is_initialized()
    assert read_results(tmp_path / "out").rows == ()


def test_a_cancelled_run_keeps_what_was_written_and_resumes_on_the_rest(cluster, corpus, tmp_path):
    spec = CorpusSpec(configs=tag_configs([_config(c) for c in CONFIGS]))
    token = CancelToken()
    with pytest.raises(Cancelled):
        run_corpus(corpus, spec, tmp_path / "out", engine=RayEngine(address=cluster["address"]),
                   progress=Progress(cancel=token), on_rows=lambda outcome: token.cancel())
    assert not ray.is_initialized()
    first = {r["doc"] for r in read_results(tmp_path / "out").rows} | {
        s["doc"] for s in read_results(tmp_path / "out").skipped if s["doc"] != "table.xyz"}
    assert len(first) == 1  # the one document delivered before the cancel; the ones in flight were cancelled
    resumed = run_corpus(corpus, spec, tmp_path / "out", engine=RayEngine(address=cluster["address"]))
    assert (resumed.ran, resumed.resumed_rows) == (3, 2 if first != {"broken.pdf"} else 0)
    assert sorted({r["doc"] for r in read_results(tmp_path / "out").rows}) == [
        "clockmaker.txt", "notes/kestrel.md", "release.html"]


def test_an_address_with_no_cluster_is_one_line():
    with pytest.raises(ModelError, match=r"^cannot start or join the Ray cluster at 127\.0\.0\.1:\d+: "):
        RayEngine(address=f"127.0.0.1:{_free_port()}").run([], _spec(), lambda outcome: None, progress=Progress())


def test_the_workers_get_the_checkout_and_the_driver_s_model_settings(monkeypatch):
    monkeypatch.setenv("CHUNKLAB_LM", "/models/lm.gguf")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HOME_SECRET", "not sent")
    monkeypatch.delenv("CHUNKLAB_TORCH_THREADS", raising=False)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    env = worker_env()
    assert (env["CHUNKLAB_LM"], env["HF_HUB_OFFLINE"], env["PYTHONPATH"]) == ("/models/lm.gguf", "1", str(ROOT))
    assert "HOME_SECRET" not in env and int(env["CHUNKLAB_TORCH_THREADS"]) >= 1
    # A local Ray's workers read the checkout; a cluster's get the backend package from Ray (py_modules).
    assert runtime_env(None) == {"env_vars": env}
    assert runtime_env("10.0.0.5:6379") == {"env_vars": env, "py_modules": [str(ROOT / "backend")],
                                            "excludes": ["__pycache__/", "*.pyc"]}
