"""Scoring text with a local causal LM: per-token NLL, conditional NLL, next-token probabilities.

:class:`LocalScorer` implements :class:`~backend.models.types.Scorer` over a
:class:`~backend.models.lm.LanguageModel`. Every forward pass runs under
``torch.inference_mode()`` and the model's lock; log-probabilities are computed in float32
(``logsumexp(logits) - logit[target]``) even when the model runs in half precision, and only
for the positions that are scored (``logits_to_keep``): on SmolLM2's 49k-token vocabulary
the logits are about a sixth of a forward pass on the CPU.

Long texts: a sliding window that recomputes its context
    A text longer than ``window`` tokens (default: the model's context length, 8192 for
    SmolLM2) is scored in windows of at most ``window`` tokens. The first window scores its
    tokens 1 … window-1 with all their preceding context, exactly as one forward pass over the
    whole text would. Every later window scores the next ``block`` tokens (default
    ``window // 2``) and feeds the ``window - block`` tokens before them as a fresh prefix,
    with positions starting again at 0. Each token is scored exactly once, with between
    ``window - block`` and ``window - 1`` tokens of context, and a score depends only on the
    tokens inside its window — the same as scoring that window as a text of its own.

    The alternative the Meta-Chunking paper describes — carry the KV cache forward and drop
    its oldest entries — was rejected for correctness: (1) the kept keys and values were
    computed while the dropped tokens were still visible, so scores keep depending on text
    that is supposedly out of the window; (2) dropping the first tokens of a sequence, on
    which attention heads park their surplus weight ("attention sinks", Xiao et al. 2023,
    StreamingLLM), makes the model's NLL jump; (3) with RoPE the kept keys keep their
    absolute rotary positions, so new tokens' positions grow without bound and pass
    ``max_position_embeddings`` on long texts. Recomputing avoids all three.

    What the window costs: every window after the first re-encodes ``window - block``
    context tokens it does not score. A text of ``n > window`` tokens costs about
    ``window + (n - window) * window / block`` token-forwards instead of ``n`` — twice the
    work in the long run with the default ``block = window // 2`` (``block = 3/4 window``
    costs 1.33x but leaves every token at least a quarter window of context). Texts up to
    ``window`` tokens cost exactly one pass; 10,000 tokens at SmolLM2's 8192 feed 14,096
    (1.41x). Windows are independent, so on a GPU several run in one batch.

    A window goes through the model in one call unless its logits (``tokens × vocabulary``
    values) would pass 2 GiB (a 8192-token SmolLM2 window in float32 makes 1.6 GB); it is
    then cut into equal chunks that extend a KV cache — the same numbers as one pass, within
    float rounding, but 10-15% slower on a 2-core CPU (measured on 4096 tokens in two chunks;
    attention over a cache takes an explicit mask instead of the causal fast path).
    Log-probabilities are taken 128 positions at a time, so the float32 work stays small.

Conditional NLL of pairs ``(d, q)``
    ``d`` and ``q`` are tokenized separately (no special tokens) and concatenated; the score is
    the mean NLL of q's tokens (q's first token is predicted from d's last position). Pairs
    that share a ``d`` run ``d`` once; its KV cache is then copied to a batch of q's, padded
    on the right. Right padding needs no attention mask with a causal model: a real token
    never attends to a later (padding) position. A ``d`` with a single ``q`` is scored as the
    concatenation, batched with the other such pairs. An empty ``d`` becomes one space, the
    MoC authors' convention for the unconditional ppl(q).

Every batch goes through :func:`~backend.models.devices.run_batched`, so running out of GPU
memory halves the batch instead of failing.
"""

from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from backend.errors import ModelError, ParameterError
from backend.models.devices import run_batched, suggest_batch_size
from backend.models.lm import LanguageModel, load_lm
from backend.models.rates import RateKey, rate_store
from backend.models.scoring import pair_work
from backend.models.types import ModelInfo, PartialTokenScores, TokenScores
from backend.progress import Progress, acquired

__all__ = ["LocalScorer", "load_scorer", "sliding_windows"]

_DEFAULT_WINDOW = 2048  # when a model does not state its context length
_CPU_BATCH_TOKENS = 2048  # on the CPU, rows are batched up to about this many tokens
_LOGITS_BUDGET = 2 << 30  # bytes of logits one forward call may produce


def sliding_windows(n: int, window: int, block: int) -> list[tuple[int, int, int]]:
    """The windows :meth:`LocalScorer.token_nll` runs over a text of ``n`` tokens.

    Returns:
        ``(lo, first, hi)`` per window: tokens ``lo … hi-1`` go through the model and tokens
        ``first … hi-1`` are scored. The first window is ``(0, 1, min(n, window))``; each
        later one scores ``block`` tokens after ``window - block`` tokens of context.
    """
    if n < 2:
        return []
    if n <= window:
        return [(0, 1, n)]
    out = [(0, 1, window)]
    pos = window
    while pos < n:
        hi = min(n, pos + block)
        out.append((pos - (window - block), pos, hi))
        pos = hi
    return out


_NLL_ROWS = 128  # positions per logsumexp: its temporaries stay in cache (2x faster on a 49k vocabulary)


def _resumable_prefix(
    resume: PartialTokenScores | None, wins: list[tuple[int, int, int]], starts: np.ndarray, ends: np.ndarray, w: int
) -> int:
    """How many leading tokens ``resume`` holds final scores for, for this pass; 0 when it does not fit it."""
    if resume is None or resume.scores.window != w:
        return 0
    done = int(resume.scored)
    old = resume.scores
    if not 1 < done < len(starts) or done not in {hi for _, _, hi in wins}:
        return 0
    if len(old) != len(starts) or not (np.array_equal(old.starts, starts) and np.array_equal(old.ends, ends)):
        return 0
    if np.isnan(old.nll[1:done]).any():
        return 0
    return done


def _nll(logits: Any, target: Any) -> Any:
    """``logsumexp(logits) - logits[target]`` in float32, over [batch, positions, vocab] logits."""
    import torch

    picked = logits.gather(-1, target.unsqueeze(-1)).squeeze(-1).float()
    lse = torch.empty_like(picked)
    for i in range(0, logits.shape[1], _NLL_ROWS):
        lse[:, i : i + _NLL_ROWS] = torch.logsumexp(logits[:, i : i + _NLL_ROWS].float(), dim=-1)
    return lse - picked


@dataclass
class _Prefix:
    """A context run once: its KV cache (batch 1) and the logits after its last token."""

    layers: list[tuple[Any, Any]]
    last_logits: Any  # float32 [vocab]
    length: int


class _Ticker:
    """Turns per-chunk token counts into monotonic ``progress(done, total)`` calls (with their work, when known)."""

    def __init__(self, progress: Progress, total: int, total_work: float | None = None) -> None:
        self.progress, self.total = progress, total
        self.base = 0  # tokens of finished batches
        self.partial = 0  # tokens of the running batch
        self.inflight = 0  # the running forward call's share of its tokens, by layers done
        self.reported = -1
        self.total_work = total_work  # None: a unit weighs 1
        self.base_work = 0.0  # work of finished batches
        self.batch = (0, 0.0)  # the running batch's (units, work)
        self.weights: list[float] = []  # each pair's work, when the units are pairs

    def start_pairs(self, batch: Sequence[int]) -> None:
        """A batch of the pairs at ``batch`` (indices into :attr:`weights`) starts."""
        self.start_batch(len(batch), sum(self.weights[i] for i in batch) if self.weights else 0.0)

    def start_batch(self, units: int = 0, work: float = 0.0) -> None:
        self.partial = 0  # a batch retried after running out of memory starts again
        self.inflight = 0
        self.batch = (units, work)

    def within(self, k: int) -> None:
        """The running forward call has done the work of ``k`` of its tokens (its layers so far)."""
        self.inflight = k
        self.report()

    def add(self, k: int) -> None:
        self.partial += k
        self.inflight = 0
        self.report()

    def finish_batch(self, k: int) -> None:
        self.base += k
        self.base_work += self.batch[1]
        self.partial = 0
        self.inflight = 0
        self.batch = (0, 0.0)
        self.report()

    def report(self) -> None:
        done = min(self.total, self.base + self.partial + self.inflight)
        if done > self.reported:
            self.reported = done
            work = None
            if self.total_work is not None:
                units, batch_work = self.batch
                share = min(1.0, (self.partial + self.inflight) / units) if units > 0 else 0.0
                work = (min(self.total_work, self.base_work + share * batch_work), self.total_work)
            self.progress(done, self.total, work=work)


class LocalScorer:
    """A :class:`~backend.models.types.Scorer` running a transformers causal LM in this process.

    Args:
        lm: The loaded model (see :func:`~backend.models.lm.load_lm`).
        chunk_tokens: Most tokens per forward call (default: as many as keep one call's
            logits within 2 GiB); memory and speed depend on it, not the scores.
    """

    resumable = True  # token_nll takes ``resume``: a pass cut short goes on from its last published batch

    def __init__(self, lm: LanguageModel, *, chunk_tokens: int | None = None) -> None:
        import torch

        self.lm = lm
        self.info: ModelInfo = lm.info
        self._layers: list[Any] | None = None
        self._warmed: set[str] = set()  # kinds of work measured once already (the first pays the warm-up)
        self._torch = torch
        self._device = torch.device(lm.info.device)
        on_gpu = lm.info.device.startswith("cuda") or lm.info.device == "mps"
        if chunk_tokens is not None and chunk_tokens < 1:
            raise ParameterError(f"chunk_tokens ({chunk_tokens}) must be at least 1")
        self.chunk_tokens = chunk_tokens
        self._on_gpu = on_gpu
        tok = lm.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        self._pad_id = int(pad) if pad is not None else 0  # never scored, never attended to
        cfg = lm.model.config.get_text_config()
        elem = lm.model.dtype.itemsize
        heads = int(getattr(cfg, "num_attention_heads", 1))
        kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
        hidden = int(getattr(cfg, "hidden_size", 1024))
        head_dim = int(getattr(cfg, "head_dim", None) or hidden // heads)
        layers = int(getattr(cfg, "num_hidden_layers", 1))
        inter = int(getattr(cfg, "intermediate_size", None) or 4 * hidden)
        vocab = int(lm.model.get_output_embeddings().weight.shape[0])
        self._vocab = vocab
        self._heads = heads
        self._elem = elem
        # Rough working memory per token, for batch sizes (run_batched corrects a bad guess).
        self._kv_per_token = 2 * layers * kv_heads * head_dim * elem
        self._act_per_token = (8 * hidden + 3 * inter) * elem
        self._logits_per_token = vocab * elem  # float32 work on them goes _NLL_ROWS positions at a time
        # Multiply-adds per token, for the work a window costs (window_work): the layers' weights, attention
        # over each earlier token of the window, and the logits of a scored token.
        linear = layers * (2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + 3 * hidden * inter)
        self._attention_span = linear / max(1, layers * 2 * heads * head_dim)
        self._logits_share = hidden * vocab / max(1, linear)

    # ---------------------------------------------------------------- tokenization

    def tokenize_with_offsets(self, text: str) -> tuple[list[int], np.ndarray, np.ndarray]:
        """Token ids of ``text`` (no special tokens) with each token's character span.

        Returns:
            ``(ids, starts, ends)``; ``starts`` is made ascending (byte-level tokens that split
            one character share its start) and ``ends >= starts``.
        """
        with self.lm.lock:
            enc = self.lm.tokenizer(
                text, add_special_tokens=False, return_offsets_mapping=True, return_attention_mask=False, verbose=False
            )
        ids = list(enc["input_ids"])
        if not ids:
            empty = np.zeros(0, dtype=np.int64)
            return ids, empty, empty.copy()
        offsets = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        starts = np.maximum.accumulate(offsets[:, 0])
        ends = np.maximum(offsets[:, 1], starts)
        return ids, starts, ends

    def _ids(self, text: str) -> np.ndarray:
        with self.lm.lock:
            ids = self.lm.tokenizer(text, add_special_tokens=False, return_attention_mask=False, verbose=False)[
                "input_ids"
            ]
        return np.asarray(ids, dtype=np.int64)

    # ---------------------------------------------------------------- token_nll

    def window_work(self, fed: int, scored: int) -> float:
        """What one forward pass over ``fed`` tokens scoring ``scored`` of them costs, in token-equivalents.

        A token fed costs 1 (the layers' weights) plus its attention over the earlier tokens of the
        window (``position / attention span``: for SmolLM2 the span is about 3,000 tokens, so a token at
        position 8,000 costs 3.6), and a scored token its logits (about 0.27 for SmolLM2's vocabulary).
        Why an ETA needs it: on a long document the first window scores all its tokens, each later
        one scores half of what it feeds, and attention grows with the window, so a token scored
        late costs about twice one scored early (the ETA of a pass counted in scored tokens alone was
        measured at half the time left).
        """
        return fed + fed * fed / (2 * self._attention_span) + scored * self._logits_share

    def _record(self, work: str, units: float, amount: float, seconds: float, chars: float) -> None:
        """Add a measurement of this model's speed to the rate store (see :mod:`backend.models.rates`).

        The first measurement of each kind of work after the model loaded is left out: it pays the
        process's one-time warm-up (kernel selection, first allocations), measured at up to twice
        the time of the same work later.
        """
        if work not in self._warmed:
            self._warmed.add(work)
            return
        rate_store().record(RateKey.of(self.info, work), units, amount, seconds, chars=chars)

    def resolve_window(self, window: int | None = None, block: int | None = None) -> tuple[int, int]:
        """The ``(window, block)`` that :meth:`token_nll` uses for these arguments.

        Raises:
            ParameterError: for a window below 2 or above the context length, or a block
                outside ``1 … window-1``.
        """
        ctx = self.info.context_length
        w = int(window) if window is not None else (ctx or _DEFAULT_WINDOW)
        if w < 2:
            raise ParameterError(f"window ({w}) must be at least 2 tokens")
        if ctx is not None and w > ctx:
            raise ParameterError(f"window ({w}) must be at most the model's context length ({ctx})")
        b = int(block) if block is not None else w // 2
        if not 1 <= b < w:
            raise ParameterError(f"block ({b}) must be between 1 and window - 1 ({w - 1})")
        return w, b

    def token_nll(
        self,
        text: str,
        *,
        window: int | None = None,
        block: int | None = None,
        progress: Progress | None = None,
        resume: PartialTokenScores | None = None,
    ) -> TokenScores:
        """NLL of every token of ``text`` given the tokens before it (see the module docstring).

        Args:
            text: The text, tokenized once without special tokens.
            window: Most tokens in one forward pass (default and maximum: the context length).
            block: Tokens scored per window after the first (default ``window // 2``).
            progress: ``progress(tokens scored, tokens to score)``; may raise ``Cancelled``. It is
                handed a :class:`~backend.models.types.PartialTokenScores` after each batch of
                windows (:meth:`~backend.progress.Progress.publish`).
            resume: A partial result of an earlier pass over the same text and window (one
                published as above): its scored tokens are kept and only the windows after
                them run. Ignored when it does not fit (other tokens, or not on a window's end).

        Returns:
            Scores aligned with the tokens' character offsets; the first token's is ``nan``.
        """
        w, b = self.resolve_window(window, block)
        progress = progress or Progress()
        with acquired(self.lm.lock, progress):  # tokenizing needs the model's lock too
            return self._token_nll(text, w, b, progress, resume)

    def _token_nll(
        self, text: str, w: int, b: int, progress: Progress, resume: PartialTokenScores | None = None
    ) -> TokenScores:
        """:meth:`token_nll` with the window resolved, under the model's lock."""
        ids_list, starts, ends = self.tokenize_with_offsets(text)
        ids = np.asarray(ids_list, dtype=np.int64)
        n = ids.size
        nll = np.full(n, np.nan, dtype=np.float64)
        wins = sliding_windows(n, w, b)
        if not wins:
            return TokenScores(starts, ends, nll, w)
        work = {win: self.window_work(win[2] - win[0], win[2] - win[1]) for win in wins}
        ticker = _Ticker(progress, n - 1, sum(work.values()))
        done = _resumable_prefix(resume, wins, starts, ends, w)
        if done:  # windows ending at or before ``done`` were scored by the interrupted pass
            nll[:done] = resume.scores.nll[:done]
            ticker.base_work = sum(work[win] for win in wins if win[2] <= done)
            wins = [win for win in wins if win[2] > done]
            ticker.base = done - 1
        measured = rate_store().of_model(self.info, "token_nll")
        progress.expect(measured.work_per_s if measured is not None else None)

        def run(batch: Sequence[tuple[int, int, int]]) -> list[np.ndarray]:
            scored = sum(hi - s for _, s, hi in batch)
            batch_work = sum(work[win] for win in batch)
            ticker.start_batch(scored, batch_work)
            started = time.perf_counter()
            rows = [ids[lo:hi] for lo, _, hi in batch]
            first = [s - lo for lo, s, _ in batch]
            out = self._score_rows(rows, first, tick=ticker.add, within=ticker.within)
            # The windows come in order: tokens 0 … hi-1 are final now.
            for (_, s, hi), row in zip(batch, out):
                nll[s:hi] = row
            chars = sum(int(ends[hi - 1]) - int(starts[s]) for _, s, hi in batch)
            self._record("token_nll", scored, batch_work, time.perf_counter() - started, chars)
            measured = rate_store().of_model(self.info, "token_nll")
            progress.expect(measured.work_per_s if measured is not None else None)
            upto = batch[-1][2]
            progress.publish(PartialTokenScores(TokenScores(starts, ends, nll.copy(), w), upto, text))
            ticker.finish_batch(scored)
            return out

        size = self.batch_size_for(max(hi - lo for lo, _, hi in wins))
        ticker.report()  # the count starts once the model is this run's
        results = run_batched(run, wins, size) if wins else []
        for (_, s, hi), scores in zip(wins, results):
            nll[s:hi] = scores
        return TokenScores(starts, ends, nll, w)

    # ---------------------------------------------------------------- conditional_nll

    def conditional_nll(self, pairs: Sequence[tuple[str, str]], *, progress: Progress | None = None) -> list[float]:
        """Mean NLL of each q's tokens given d, for pairs ``(d, q)`` (see the module docstring).

        An empty q has no token to score and gets ``nan``. If ``d + q`` is longer than the
        context, d keeps its last tokens (for pairs sharing d: as many as fit with the longest q).

        Args:
            pairs: ``(d, q)`` string pairs.
            progress: ``progress(pairs done, pairs)``; may raise ``Cancelled``.

        Raises:
            ParameterError: for a pair that is not two strings, or a q longer than the context.
        """
        for i, pair in enumerate(pairs):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
                raise ParameterError(f"pair {i} must be a (context, continuation) pair of strings, got {pair!r}")
        out = [math.nan] * len(pairs)
        progress = progress or Progress()
        # Pairs differ in length (and a shared context runs once): the count's work is each pair's weight,
        # so the ETA does not take the long pairs scored first for the speed of the whole run.
        weights = pair_work([(str(d), str(q)) for d, q in pairs])
        ticker = _Ticker(progress, len(pairs), float(sum(weights)))
        ticker.weights = weights
        ctx = self.info.context_length
        with acquired(self.lm.lock, progress):
            ticker.report()  # the count starts once the model is this run's
            started = time.perf_counter()  # the speed is measured from here: waiting for the lock is not scoring
            tokens: dict[str, np.ndarray] = {}

            def tok(s: str) -> np.ndarray:
                hit = tokens.get(s)
                if hit is None:
                    hit = tokens[s] = self._ids(s)
                return hit

            groups: dict[str, list[int]] = {}
            for i, (d, q) in enumerate(pairs):
                q_ids = tok(q)
                if q_ids.size == 0:
                    ticker.start_batch(1, weights[i])
                    ticker.finish_batch(1)
                    continue
                if ctx is not None and q_ids.size >= ctx:
                    raise ParameterError(
                        f"continuation of pair {i} has {q_ids.size} tokens; at most {ctx - 1} fit the model's context"
                    )
                groups.setdefault(d if d else " ", []).append(i)
            singles = [idx[0] for idx in groups.values() if len(idx) == 1]
            if singles:
                self._conditional_singles(pairs, singles, tok, out, ticker)
            for d, idx in groups.items():
                if len(idx) > 1:
                    self._conditional_group(d, pairs, idx, tok, out, ticker)
            self._record("pairs", len(pairs), sum(weights), time.perf_counter() - started, sum(weights))
        return out

    def _conditional_singles(
        self,
        pairs: Sequence[tuple[str, str]],
        which: list[int],
        tok: Callable[[str], np.ndarray],
        out: list[float],
        ticker: _Ticker,
    ) -> None:
        """Pairs whose d is used once: one forward over d + q each, batched."""
        ctx = self.info.context_length
        rows: dict[int, tuple[np.ndarray, int]] = {}
        for i in which:
            d, q = pairs[i]
            d_ids, q_ids = tok(d if d else " "), tok(q)
            if ctx is not None and d_ids.size + q_ids.size > ctx:
                d_ids = d_ids[d_ids.size + q_ids.size - ctx :]
            rows[i] = (np.concatenate([d_ids, q_ids]), d_ids.size)
        order = sorted(which, key=lambda i: -rows[i][0].size)  # similar lengths share a batch: less padding

        def run(batch: Sequence[int]) -> list[float]:
            ticker.start_pairs(batch)
            scores = self._score_rows([rows[i][0] for i in batch], [rows[i][1] for i in batch])
            ticker.finish_batch(len(batch))
            return [float(s.mean()) for s in scores]

        size = self.batch_size_for(rows[order[0]][0].size)
        for i, score in zip(order, run_batched(run, order, size)):
            out[i] = score

    def _conditional_group(
        self,
        d: str,
        pairs: Sequence[tuple[str, str]],
        which: list[int],
        tok: Callable[[str], np.ndarray],
        out: list[float],
        ticker: _Ticker,
    ) -> None:
        """Pairs sharing d: d once, then its KV cache copied to batches of q's."""
        ctx = self.info.context_length
        q_rows = {i: tok(pairs[i][1]) for i in which}
        longest_q = max(r.size for r in q_rows.values())
        d_ids = tok(d)
        if ctx is not None and d_ids.size + longest_q > ctx:
            d_ids = d_ids[d_ids.size + longest_q - ctx :]
        # Through run_batched (a batch of one) so that running out of memory is a ModelError.
        prefix = run_batched(lambda _: [self._prefix(d_ids, keep_cache=True)], [d], 1)[0]
        order = sorted(which, key=lambda i: -q_rows[i].size)

        def run(batch: Sequence[int]) -> list[float]:
            ticker.start_pairs(batch)
            scores = self._score_rows([q_rows[i] for i in batch], [0] * len(batch), prefix=prefix)
            ticker.finish_batch(len(batch))
            return [float(s.mean()) for s in scores]

        per_item = self._bytes_per_item(
            prefix.length + longest_q, self.forward_chunk(1, longest_q), prefix.length + longest_q
        )
        for i, score in zip(order, run_batched(run, order, self._batch_size(per_item, longest_q))):
            out[i] = score

    # ---------------------------------------------------------------- next-token probabilities

    def next_token_distribution(self, prompt: str | list[dict[str, str]]) -> np.ndarray:
        """Probabilities (float64, summing to 1) of every vocabulary entry as the next token.

        A list of chat messages is rendered with the tokenizer's chat template, generation
        prompt added; a string is used as is. Either is tokenized without adding special tokens.
        """
        text = self._render_prompt(prompt)
        ids = self._ids(text if text else " ")
        ctx = self.info.context_length
        if ctx is not None and ids.size > ctx:
            ids = ids[ids.size - ctx :]
        torch = self._torch
        with self.lm.lock:
            prefix = run_batched(lambda _: [self._prefix(ids, keep_cache=False)], [text], 1)[0]
            with torch.inference_mode():
                # float64: in float32 the 49k probabilities sum to 1 only within ~1e-5.
                probs = torch.softmax(prefix.last_logits.double(), dim=-1)
        return probs.cpu().numpy()

    def next_token_probs(self, prompt: str | list[dict[str, str]], candidates: Sequence[str]) -> dict[str, float]:
        """Probability of each candidate's first token as the next token after ``prompt``.

        The softmax runs over the whole vocabulary, so the candidates' probabilities need not
        sum to 1. Candidates are tokenized without special tokens; mind leading spaces
        (``"1"`` and ``" 1"`` are different tokens).

        Raises:
            ParameterError: for no candidates, a candidate with no token, or a malformed prompt.
        """
        if isinstance(candidates, str) or not candidates:
            raise ParameterError(f"candidates must be a non-empty list of strings, got {candidates!r}")
        first: dict[str, int] = {}
        for c in candidates:
            ids = self._ids(c) if isinstance(c, str) else np.zeros(0, dtype=np.int64)
            if ids.size == 0:
                raise ParameterError(f"candidate {c!r} has no token")
            first[c] = int(ids[0])
        probs = self.next_token_distribution(prompt)
        return {c: float(probs[t]) for c, t in first.items()}

    def _render_prompt(self, prompt: str | list[dict[str, str]]) -> str:
        if isinstance(prompt, str):
            return prompt
        if not isinstance(prompt, list) or not prompt:
            raise ParameterError("prompt must be a string or a non-empty list of chat messages")
        for i, m in enumerate(prompt):
            if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
                raise ParameterError(f"chat message {i} must be a dict with string 'role' and 'content', got {m!r}")
        tok = self.lm.tokenizer
        if not getattr(tok, "chat_template", None):
            raise ParameterError(f"model {self.info.name!r} has no chat template; pass the prompt as a string")
        with self.lm.lock:
            try:
                return tok.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
            except Exception as e:  # jinja raises its own types for templates that reject the messages
                raise ParameterError(f"the chat template rejected the messages: {str(e).splitlines()[0]}") from e

    # ---------------------------------------------------------------- forward passes

    def batch_size_for(self, tokens: int) -> int:
        """Rows of ``tokens`` tokens that one forward call starts with on this device (halved on out-of-memory).

        What :meth:`token_nll` takes for its windows (``tokens``: the longest window) and
        :meth:`conditional_nll` for pairs scored as one row each (the longest pair), sized from
        the device's free memory (:func:`~backend.models.devices.suggest_batch_size`).
        """
        t = max(1, int(tokens))
        return self._batch_size(self._bytes_per_item(t, self.forward_chunk(1, t), t), t)

    def _batch_size(self, bytes_per_item: int, tokens_per_item: int) -> int:
        # A CPU gains from batching only short rows (per-call overhead); long rows already keep
        # its cores busy, and padding the shorter rows of a batch would be pure waste.
        cap = 64 if self._on_gpu else max(1, min(8, _CPU_BATCH_TOKENS // max(1, tokens_per_item)))
        return suggest_batch_size(self.info.device, max(1, bytes_per_item), cap=cap)

    def forward_chunk(self, rows: int, width: int) -> int:
        """Columns per forward call for ``rows`` rows of ``width`` tokens: all, or equal parts."""
        limit = self.chunk_tokens or max(256, _LOGITS_BUDGET // (rows * self._vocab * self._elem))
        parts = -(-width // limit)
        return -(-width // parts)

    def _bytes_per_item(self, kv_tokens: int, chunk: int, attended: int) -> int:
        """Working memory of one row: its KV cache plus one chunk's activations and logits."""
        attention = self._heads * attended * 4  # attention weights, if the kernel materializes them
        return kv_tokens * self._kv_per_token + chunk * (self._act_per_token + self._logits_per_token + attention)

    def _prefix(self, ids: np.ndarray, *, keep_cache: bool) -> _Prefix:
        """Run ``ids`` (batch 1) in chunks; keep the logits after the last token (and the cache)."""
        torch = self._torch
        from transformers import DynamicCache

        model = self.lm.model
        n = int(ids.size)
        if n == 0:
            raise ModelError("internal: an empty prefix")  # callers substitute " " for empty text
        t = torch.from_numpy(ids).to(self._device).unsqueeze(0)
        chunk = self.forward_chunk(1, n)
        with torch.inference_mode():
            cache = DynamicCache(config=model.config) if (keep_cache or n > chunk) else None
            res = None
            for c0 in range(0, n, chunk):
                res = model(
                    input_ids=t[:, c0 : c0 + chunk],
                    past_key_values=cache,
                    use_cache=cache is not None,
                    logits_to_keep=1,
                )
                cache = res.past_key_values if cache is not None else None
            last = res.logits[0, -1].float()
            layers = [(layer.keys, layer.values) for layer in cache.layers] if keep_cache else []
        return _Prefix(layers, last, n)

    def _score_rows(
        self,
        rows: Sequence[np.ndarray],
        first: Sequence[int],
        *,
        prefix: _Prefix | None = None,
        tick: Callable[[int], None] | None = None,
        within: Callable[[int], None] | None = None,
    ) -> list[np.ndarray]:
        """NLL of ``rows[r][first[r]:]``, each token given the row's earlier tokens (after ``prefix``).

        Rows are padded on the right and run as one batch, in chunks of columns (see
        :meth:`forward_chunk`) that extend a KV cache. ``first[r]`` may be 0 only with a prefix (the row's
        first token is then predicted from the prefix's last logits). ``tick(k)``: ``k`` more
        tokens scored; ``within(k)``: the running forward call has done the work of ``k`` of
        the tokens it scores (called after each decoder layer, so one long call shows progress).
        """
        torch = self._torch
        from transformers import DynamicCache

        model = self.lm.model
        b = len(rows)
        lengths = [int(r.size) for r in rows]
        width = max(lengths)
        grid = np.full((b, width + 1), self._pad_id, dtype=np.int64)  # +1: the target after the last column
        for r, row in enumerate(rows):
            grid[r, : row.size] = row
        out = np.full((b, width), np.nan, dtype=np.float64)
        # Logit column j predicts token j+1: the columns needed run from min(first)-1 to max(len)-2.
        need_lo = min(first) - 1
        need_hi = max(lengths) - 1
        chunk = self.forward_chunk(b, width)
        with torch.inference_mode():
            ids = torch.from_numpy(grid).to(self._device)
            cache = None
            if prefix is not None:
                cache = DynamicCache(
                    [(k.expand(b, -1, -1, -1), v.expand(b, -1, -1, -1)) for k, v in prefix.layers], config=model.config
                )
                if need_lo < 0:
                    last = prefix.last_logits
                    lse = torch.logsumexp(last, dim=-1)
                    out[:, 0] = (lse - last[ids[:, 0]]).cpu().numpy()
                    if tick is not None:
                        tick(sum(1 for f in first if f == 0))
            elif width > chunk:
                cache = DynamicCache(config=model.config)
            for c0 in range(0, width, chunk):
                c1 = min(width, c0 + chunk)
                lo, hi = max(c0, need_lo), min(c1, need_hi)
                keep = c1 - lo if lo < hi else 1
                scored = sum(max(0, min(c1 + 1, n) - max(c0 + 1, f)) for n, f in zip(lengths, first))
                with self._layer_progress(within, scored):
                    res = model(
                        input_ids=ids[:, c0:c1], past_key_values=cache, use_cache=cache is not None, logits_to_keep=keep
                    )
                cache = res.past_key_values if cache is not None else None
                if lo < hi:
                    nll = _nll(res.logits[:, : hi - lo], ids[:, lo + 1 : hi + 1])
                    out[:, lo + 1 : hi + 1] = nll.cpu().numpy()
                    del nll
                if tick is not None:
                    tick(scored)  # columns c0 … c1-1 scored tokens c0+1 … c1 of each row, where scored at all
        return [out[r, f:n] for r, (f, n) in enumerate(zip(first, lengths))]

    def _decoder_layers(self) -> list[Any]:
        """The model's decoder layers (the module list as long as ``num_hidden_layers``), in order; [] if none."""
        if self._layers is None:
            torch = self._torch
            count = int(getattr(self.lm.model.config.get_text_config(), "num_hidden_layers", 0) or 0)
            found = next(
                (m for m in self.lm.model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == count), None
            )
            self._layers = list(found) if found is not None and count > 0 else []
        return self._layers

    @contextmanager
    def _layer_progress(self, within: Callable[[int], None] | None, tokens: int) -> Iterator[None]:
        """While the block runs one forward call scoring ``tokens``: ``within(share)`` after each decoder layer.

        Layer ``i`` of ``L`` done counts ``tokens * i / (L + 1)`` (the last share is the logits);
        hooks on the shared model are safe because forward passes hold its lock.
        """
        layers = self._decoder_layers() if within is not None and tokens > 0 else []
        handles = [
            layer.register_forward_hook(
                lambda *_args, i=i: within(tokens * (i + 1) // (len(layers) + 1))  # type: ignore[misc]
            )
            for i, layer in enumerate(layers)
        ]
        try:
            yield
        finally:
            for h in handles:
                h.remove()


_scorers: dict[tuple[str, str, str], LocalScorer] = {}
_scorers_lock = threading.Lock()


def load_scorer(
    spec: str | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    precision: str | None = None,
) -> LocalScorer:
    """A :class:`LocalScorer` over :func:`~backend.models.lm.load_lm`, one per model and process.

    Args:
        spec: As for :func:`~backend.models.lm.load_lm` (``None``: ``CHUNKLAB_LM`` or the bundled SmolLM2).
        device: As for :func:`~backend.models.devices.select_device` (default ``CHUNKLAB_DEVICE``).
        progress: Says ``queued behind another run`` while another run loads a model.

    Raises:
        ModelError: when the model cannot be found or read.
        ParameterError: for a bad device.
    """
    lm = load_lm(spec, device, progress, precision)
    key = (lm.info.source, lm.info.device, lm.info.dtype)
    with _scorers_lock:
        hit = _scorers.get(key)
        if hit is None or hit.lm is not lm:
            hit = _scorers[key] = LocalScorer(lm)
        return hit
