"""Cost of LocalScorer over the bare forward passes it cannot avoid, on the bundled SmolLM2.

Measured in one run, on a document of ``--tokens`` tokens built from the bundled English
samples (concatenated, then cut to length):

1. bare forward: one ``model(window, logits_to_keep=…)`` call per window of the sliding
   window that ``token_nll`` uses (same windows, same scored positions), nothing else —
   the minimal work;
2. ``token_nll`` wall time, and its ratio to (1) (the target is at most 1.10x);
3. ``conditional_nll`` over every ordered pair of ``--chunks`` consecutive chunks of
   ``--chunk-tokens`` tokens (20 chunks: 380 pairs): scored tokens per second, against the
   bare forward's tokens per second and against a naive scorer that runs one forward pass
   over ``d + q`` per pair (timed on ``--naive-pairs`` pairs and extrapolated);
4. peak memory: the process's maximum resident set (``ru_maxrss``) and, on CUDA,
   ``torch.cuda.max_memory_allocated``.

5. with ``--precisions float16,bfloat16`` (CPU): each precision's ``token_nll`` tokens/s on the
   same document against float32's in the same run (target 2x), the max |ΔNLL| of a
   sentence's mean NLL over the bundled samples (``--precision-samples``) against the
   documented tolerance, and whether the PPL chunker's boundaries at the default threshold
   are the same as float32's; also each sample's PPL chunking time in both precisions.

6. with ``--kernels`` (and nothing else): the model's matmul shapes and its attention at
   ``--precision-tokens`` rows in float32, bfloat16 (weights, and autocast as the bfloat16
   precision runs), float16 and int8 (the GEMM alone, with per-token dynamic quantization, and
   the accurate two-level split), each as a ratio to float32: the ceiling any faster CPU
   precision can reach on this machine.

Model load times are measured in fresh processes: warm (the converted GGUF is cached) and,
with ``--cold``, cold (the cached conversion is deleted first, so the GGUF is dequantized).
Each timing is the best of ``--repeat`` runs, interleaved. Nothing is asserted.

Run:  .venv/bin/python bench/bench_scorer.py [--tokens 10000] [--window 8192] [--cold]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from backend.models.lm import converted_dir  # noqa: E402
from backend.models.scorer import LocalScorer, load_scorer, sliding_windows  # noqa: E402
from backend.tokenizers import smollm2_gguf  # noqa: E402

_LOAD_SNIPPET = """
import json, sys, time
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
# Imported first: their import time is not the load's (transformers imports lazily).
import torch, transformers  # noqa: F401,E401
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM  # noqa: F401
t1 = time.perf_counter()
from backend.models.lm import load_lm
lm = load_lm(None, {device!r})
t2 = time.perf_counter()
print(json.dumps({{"imports": t1 - t0, "load": t2 - t1, "loaded_from": lm.loaded_from}}))
"""


def measure_load(device: str) -> dict:
    """Load the default model in a fresh process; seconds for imports and for the load itself."""
    code = _LOAD_SNIPPET.format(root=str(ROOT), device=device)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def document(scorer: LocalScorer, tokens: int) -> str:
    """English samples concatenated until there are ``tokens`` tokens, cut at that token."""
    from backend.samples import list_samples, load_sample

    english = [d.text for d in (load_sample(s.name) for s in list_samples()) if d.language == "en"]
    text = ""
    while True:
        for t in english:
            text += ("\n\n" if text else "") + t
        _, starts, _ = scorer.tokenize_with_offsets(text)
        if len(starts) > tokens:
            return text[: int(starts[tokens])]


def peak_rss_mb() -> float:
    """The process's maximum resident set so far, in MB (ru_maxrss is KB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def bare_forward(scorer: LocalScorer, ids: list[int], window: int, block: int) -> float:
    """Seconds for one model call per window, logits only where token_nll needs them."""
    import torch

    model = scorer.lm.model
    device = torch.device(scorer.info.device)
    x = torch.tensor(ids, device=device)
    t0 = time.perf_counter()
    with scorer.lm.lock, torch.inference_mode():
        for lo, s, hi in sliding_windows(len(ids), window, block):
            model(input_ids=x[lo:hi].unsqueeze(0), logits_to_keep=hi - s + 1)
        sync(device)
    return time.perf_counter() - t0


def naive_conditional(scorer: LocalScorer, pairs: list[tuple[str, str]]) -> tuple[float, list[float]]:
    """One forward over d + q per pair, then log-softmax and gather: seconds and scores."""
    import torch

    tok, model = scorer.lm.tokenizer, scorer.lm.model
    device = torch.device(scorer.info.device)
    scores = []
    t0 = time.perf_counter()
    with scorer.lm.lock, torch.inference_mode():
        for d, q in pairs:
            d_ids = tok(d or " ", add_special_tokens=False)["input_ids"]
            q_ids = tok(q, add_special_tokens=False)["input_ids"]
            x = torch.tensor([d_ids + q_ids], device=device)
            logp = torch.log_softmax(model(x).logits[0, len(d_ids) - 1 : -1].float(), dim=-1)
            scores.append(float(-logp.gather(-1, x[0, len(d_ids) :, None]).mean()))
        sync(device)
    return time.perf_counter() - t0, scores


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=10_000, help="document length in tokens (default 10000)")
    ap.add_argument("--window", type=int, default=None, help="token_nll window (default: the context length)")
    ap.add_argument("--block", type=int, default=None, help="tokens scored per later window (default window/2)")
    ap.add_argument("--chunk-forward", type=int, default=None, help="tokens per forward call inside a window")
    ap.add_argument("--chunks", type=int, default=20, help="chunks for the conditional_nll graph (default 20)")
    ap.add_argument("--chunk-tokens", type=int, default=100, help="tokens per chunk (default 100)")
    ap.add_argument("--naive-pairs", type=int, default=20, help="pairs timed for the naive scorer (default 20)")
    ap.add_argument("--repeat", type=int, default=1, help="best of this many runs (default 1)")
    ap.add_argument("--device", default=None, help="cpu, cuda, mps or auto (default CHUNKLAB_DEVICE)")
    ap.add_argument("--cold", action="store_true", help="also time a cold load (deletes the converted GGUF first)")
    ap.add_argument("--precisions", default="", help="CPU precisions to compare with float32, e.g. float16,bfloat16")
    ap.add_argument("--precision-tokens", type=int, default=2000, help="document tokens for the precision timings")
    ap.add_argument(
        "--precision-samples",
        default="narrative,technical,technical-pdf,chinese,release-notes",
        help="samples for the precision's NLL and boundary check (empty: none)",
    )
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads before anything runs")
    ap.add_argument(
        "--kernels",
        action="store_true",
        help="only time the model's matmul and attention shapes in float32, bfloat16, float16 and int8 (the ceiling of a faster precision)",
    )
    args = ap.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
        os.environ["CHUNKLAB_TORCH_THREADS"] = str(args.threads)  # the model loaders apply it
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    if args.kernels:
        compare_kernels(args)
        return
    if args.cold:
        folder = converted_dir(smollm2_gguf())
        shutil.rmtree(folder, ignore_errors=True)
        cold = measure_load(args.device or "")
        print(
            f"load, cold ({cold['loaded_from']}): {cold['load']:.2f} s (+ {cold['imports']:.2f} s importing torch and transformers)"
        )
    warm = measure_load(args.device or "")
    print(
        f"load, warm ({warm['loaded_from']}): {warm['load']:.2f} s (+ {warm['imports']:.2f} s importing torch and transformers)"
    )

    scorer = load_scorer(None, args.device)
    if args.chunk_forward:
        scorer = LocalScorer(scorer.lm, chunk_tokens=args.chunk_forward)
    info = scorer.info
    on_cuda = info.device.startswith("cuda")
    print(f"model {info.name} on {info.device} ({info.dtype}), {info.parameters / 1e6:.0f}M parameters")
    text = document(scorer, args.tokens)
    ids, _, _ = scorer.tokenize_with_offsets(text)
    n = len(ids)
    window, block = scorer.resolve_window(args.window, args.block)
    wins = sliding_windows(n, window, block)
    fed = sum(hi - lo for lo, _, hi in wins)
    print(
        f"document: {len(text):,} chars, {n:,} tokens; window {window}, block {block}: "
        f"{len(wins)} windows, {fed:,} tokens fed for {n - 1:,} scored ({fed / max(1, n - 1):.2f}x); "
        f"{scorer.forward_chunk(1, window)} tokens per forward call"
    )
    if on_cuda:
        torch.cuda.reset_peak_memory_stats()

    # Warm-up: first calls allocate and pick kernels.
    scorer.token_nll(text[:2000])
    bare_forward(scorer, ids[:256], window, block)

    t_bare, t_ours = [], []
    for _ in range(args.repeat):
        t_bare.append(bare_forward(scorer, ids, window, block))
        t0 = time.perf_counter()
        scores = scorer.token_nll(text, window=window, block=block)
        t_ours.append(time.perf_counter() - t0)
    bare, ours = min(t_bare), min(t_ours)
    bare_tps = (n - 1) / bare
    print(f"bare forward over the windows: {bare:.2f} s ({bare_tps:,.0f} scored tokens/s)")
    print(f"token_nll:                     {ours:.2f} s ({(n - 1) / ours:,.0f} tokens/s)  ratio {ours / bare:.3f}x")
    print(f"  mean NLL {float(scores.nll[1:].mean()):.4f} nats; peak RSS so far {peak_rss_mb():,.0f} MB")

    # conditional_nll over the complete graph of chunks
    _, starts, _ = scorer.tokenize_with_offsets(text)
    k, size = args.chunks, args.chunk_tokens
    if k * size >= n:
        k = max(2, (n - 1) // size)
    cuts = [int(starts[i * size]) for i in range(k)] + [int(starts[k * size]) if k * size < n else len(text)]
    chunks = [text[a:b] for a, b in zip(cuts, cuts[1:])]
    pairs = [(chunks[i], chunks[j]) for i in range(k) for j in range(k) if i != j]
    q_tokens = sum(len(scorer.tokenize_with_offsets(q)[0]) for _, q in pairs)
    t_cond = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        cond = scorer.conditional_nll(pairs)
        t_cond.append(time.perf_counter() - t0)
    tc = min(t_cond)
    sample = pairs[: min(len(pairs), args.naive_pairs)]
    t_naive, naive_scores = naive_conditional(scorer, sample)
    naive_total = t_naive * len(pairs) / len(sample)
    worst = max(abs(a - b) for a, b in zip(cond, naive_scores))
    print(
        f"conditional_nll: {len(pairs)} pairs of {k} chunks x ~{size} tokens, {q_tokens:,} tokens scored in "
        f"{tc:.2f} s = {q_tokens / tc:,.0f} tokens/s ({q_tokens / tc / bare_tps:.2f}x the bare forward's rate)"
    )
    print(
        f"naive, one forward per pair: {t_naive:.2f} s for {len(sample)} pairs -> {naive_total:.1f} s for all "
        f"({q_tokens / naive_total:,.0f} tokens/s); speedup {naive_total / tc:.2f}x; max |diff| {worst:.1e}"
    )
    print(f"peak RSS {peak_rss_mb():,.0f} MB", end="")
    if on_cuda:
        print(f"; CUDA max allocated {torch.cuda.max_memory_allocated() / 2**20:,.0f} MB", end="")
    print()
    if args.precisions:
        compare_precisions(args)


def compare_precisions(args: argparse.Namespace) -> None:
    """Each CPU precision against float32 in this run: tokens/s, max |ΔNLL| per sentence, PPL boundaries."""
    import tempfile

    import numpy as np

    import backend.chunkers  # noqa: F401  (registers the chunkers)
    from backend.chunkers import ModelContext, make_chunker
    from backend.models.cache import OutputCache
    from backend.models.devices import BFLOAT16_NLL_TOLERANCE, SENTENCE_NLL_TOLERANCE
    from backend.models.scoring import cached_token_scores, score_sentences
    from backend.samples import load_sample

    precisions = ["float32"] + [p.strip() for p in args.precisions.split(",") if p.strip() and p.strip() != "float32"]
    scorers = {p: load_scorer(None, "cpu", precision=p) for p in precisions}
    text = document(scorers["float32"], args.precision_tokens)
    for s in scorers.values():
        s.token_nll(text[:2000])  # warm-up
    tps: dict[str, float] = {p: 0.0 for p in precisions}
    for _ in range(max(1, args.repeat)):
        for p, s in scorers.items():  # interleaved: a busy machine slows every precision alike
            t0 = time.perf_counter()
            n = len(s.token_nll(text).nll)
            tps[p] = max(tps[p], (n - 1) / (time.perf_counter() - t0))
    names = [n for n in args.precision_samples.split(",") if n.strip()]
    cache = OutputCache(Path(tempfile.mkdtemp(prefix="bench-precision-")))
    per: dict[str, dict[str, tuple[np.ndarray, list]]] = {p: {} for p in precisions}
    seconds: dict[str, float] = {p: 0.0 for p in precisions}
    for name in names:
        doc = load_sample(name)
        for p, s in scorers.items():  # interleaved, sample by sample
            t0 = time.perf_counter()
            cuts = make_chunker("ppl").chunk(doc, ModelContext(scorer=s, _cache=cache)).chunks
            seconds[p] += time.perf_counter() - t0
            scores = cached_token_scores(cache, s.info.fingerprint, doc.text, None)
            means = np.array([x.nll_mean for x in score_sentences(doc, scores)], dtype=float)
            per[p][name] = (means, [(c.start, c.end) for c in cuts])
    print(
        f"precision (CPU, {args.precision_tokens} tokens, {torch_threads()} threads, best of {max(1, args.repeat)}): "
        f"float32 {tps['float32']:,.0f} tokens/s; PPL chunking of {len(names)} samples {seconds['float32']:.1f} s"
    )
    for p in precisions[1:]:
        worst, same = 0.0, True
        for name in names:
            a, b = per["float32"][name][0], per[p][name][0]
            ok = np.isfinite(a) & np.isfinite(b)
            d = float(np.abs(a - b)[ok].max()) if ok.any() else 0.0
            worst = max(worst, d)
            same_here = per["float32"][name][1] == per[p][name][1]
            same = same and same_here
            print(f"    {name}: max |ΔNLL| per sentence {d:.4f}, boundaries {'identical' if same_here else 'DIFFERENT'}")
        tolerance = BFLOAT16_NLL_TOLERANCE if p == "bfloat16" else SENTENCE_NLL_TOLERANCE
        within = worst <= tolerance and (same or p == "bfloat16")
        print(
            f"  {p}: {tps[p]:,.0f} tokens/s = {tps[p] / tps['float32']:.2f}x float32 (target 2x); "
            f"PPL chunking of the samples {seconds[p]:.1f} s = {seconds['float32'] / max(seconds[p], 1e-9):.2f}x; "
            f"max |ΔNLL| per sentence {worst:.4f} nats on {len(names)} samples "
            f"(tolerance {tolerance}); PPL boundaries {'identical' if same else 'DIFFERENT'} -> "
            f"{'within tolerance' if within else 'OUTSIDE tolerance'}"
        )


def compare_kernels(args: argparse.Namespace) -> None:
    """The scorer's matmuls and attention at ``--precision-tokens`` rows, per kernel, against float32.

    Shapes come from the bundled model's config; weights and inputs are random (speed does not
    depend on values). Every timing is the best of ``--repeat`` (at least 3), interleaved.
    int8 is timed three ways: the GEMM alone (``torch._int_mm``), with the per-token dynamic
    quantization of the input and the float32 rescale of the output that any real use pays,
    and as the two-level split (input and weight each a coarse int8 plus an int8 residual,
    three GEMMs) that keeps float32-like accuracy.
    """
    import torch
    import torch.nn.functional as F

    from backend.models.devices import best_seconds, reduced_linear

    cfg = load_scorer(None, "cpu").lm.model.config.get_text_config()
    m, hidden, inter, layers = args.precision_tokens, cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or hidden // heads
    vocab = cfg.vocab_size
    # (input, output, uses per decoder layer); the head runs once.
    shapes = [(hidden, hidden, 2), (hidden, kv_heads * head_dim, 2), (hidden, inter, 2), (inter, hidden, 1)]
    reps = max(3, args.repeat)

    def best(fn) -> float:
        return best_seconds(fn, reps)

    def quant_rows(x):
        scale = x.abs().amax(-1, keepdim=True).clamp_min(1e-12) / 127.0
        q = torch.round(x / scale)
        return q.to(torch.int8), scale, q

    def kernels(k: int, n: int) -> dict[str, float]:
        x, w = torch.randn(m, k), torch.randn(n, k)
        wb, wh = w.bfloat16(), w.half()
        wq = torch.randint(-127, 128, (k, n), dtype=torch.int8)
        xq = torch.randint(-127, 128, (m, k), dtype=torch.int8)
        sw = torch.rand(n)

        def autocast_bf16():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return F.linear(x, w)

        def int8_dynamic():
            q, s, _ = quant_rows(x)
            return torch._int_mm(q, wq).float().mul_(s).mul_(sw)

        def int8_split():
            q, s, qf = quant_rows(x)
            r = torch.round((x / s - qf) * 254).clamp_(-127, 127).to(torch.int8)
            acc = torch._int_mm(q, wq).float()
            acc.add_((torch._int_mm(q, wq) + torch._int_mm(r, wq)).float(), alpha=1 / 254)
            return acc.mul_(s).mul_(sw)

        return {
            "float32": best(lambda: F.linear(x, w)),
            "bfloat16 weights": best(lambda: reduced_linear(x, wb)),
            "bfloat16 autocast (the bfloat16 precision)": best(autocast_bf16),
            "float16 (the float16 precision)": best(lambda: reduced_linear(x, wh)),
            "int8 GEMM alone": best(lambda: torch._int_mm(xq, wq)),
            "int8 per-token dynamic": best(int8_dynamic),
            "int8 two-level split": best(int8_split),
        }

    totals: dict[str, float] = {}
    for k, n, uses in shapes:
        for name, sec in kernels(k, n).items():
            totals[name] = totals.get(name, 0.0) + sec * uses * layers
    head = kernels(hidden, vocab)
    q = torch.randn(1, heads, m, head_dim)
    kv = torch.randn(1, heads, m, head_dim)
    attention = {
        "float32": best(lambda: F.scaled_dot_product_attention(q, kv, kv, is_causal=True)) * layers,
        "bfloat16": best(
            lambda: F.scaled_dot_product_attention(q.bfloat16(), kv.bfloat16(), kv.bfloat16(), is_causal=True)
        )
        * layers,
    }
    base = totals["float32"]
    print(
        f"kernels at {m} tokens ({layers} layers, hidden {hidden}, MLP {inter}, vocabulary {vocab}), "
        f"best of {reps}; ratio = float32 time / this kernel's time:"
    )
    for name, sec in totals.items():
        print(f"  decoder matmuls, {name:<42} {sec:6.2f} s  {base / sec:5.2f}x   head {head[name]:6.3f} s  {head['float32'] / head[name]:5.2f}x")
    print(
        f"  attention (SDPA, causal)  float32 {attention['float32']:.2f} s; bfloat16 {attention['bfloat16']:.2f} s "
        f"({attention['float32'] / attention['bfloat16']:.2f}x)"
    )
    whole = base + head["float32"] + attention["float32"]
    print(
        f"  float32 shares of one pass: decoder matmuls {base / whole:.0%}, head {head['float32'] / whole:.0%}, "
        f"attention {attention['float32'] / whole:.0%}"
    )


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


if __name__ == "__main__":
    main()
