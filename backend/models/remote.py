"""A :class:`~backend.models.types.Scorer` over an OpenAI-compatible completions server.

Servers such as vLLM return the log-probabilities of the *prompt* tokens when a completion is
requested with ``echo=True, logprobs=1``: ``choices[0].logprobs`` then holds ``tokens``,
``token_logprobs`` (``null`` for the first token, which has no context) and ``text_offset``
(where each token starts in the echoed text). That is all :class:`RemoteScorer` needs; it
asks for ``max_tokens=1`` (vLLM refuses 0) and drops the generated token.

When an echo answer holds no prompt log-probs (the server refused ``echo``, or ignored it and
sent the generated token's only), the scorer asks once more with vLLM's own extension,
``extra_body={"prompt_logprobs": 0}``: ``choices[i].prompt_logprobs`` is then a list with
``null`` for the first prompt token and, for each later one, a dict keyed by token id whose
first entry is that token's ``{"logprob", "rank", "decoded_token"}``. Offsets come from the
decoded tokens (:func:`token_starts`). Whichever way answers is remembered for the scorer's
life. A server that gives neither is one :class:`ModelError` naming the servers known to work
(vLLM, either way) and those known not to: llama.cpp's llama-server (it refuses ``echo``, or
answers it with the generated token's log-probs only: ggml-org/llama.cpp issues 8942, 27174),
Ollama (its ``/v1/completions`` takes neither ``echo`` nor ``logprobs``) and OpenAI's API (no
prompt log-probs for current models).

Identity. ``info.fingerprint`` is the served model's (:meth:`ServedModel.fingerprint` of
``"remote-lm"``): what ``GET /models`` says is served under the name, never the URL or the
name asked for alone, so the same weights behind another URL share cached scores and another
model behind the same URL never does. Every completions and chat answer's ``model`` is checked
(:func:`~backend.models.openai_compat.check_answer_model`) before its log-probs are used: a
server that answers for another model than the one named (llama.cpp ignores the request's
``model``) is a :class:`ModelError`, and since the caches only store finished values, nothing
of it is kept.

Configuration (arguments win over the environment, read by :mod:`backend.config`):

- ``CHUNKLAB_REMOTE_BASE_URL`` (else ``OPENAI_BASE_URL``): e.g. ``http://gpu-box:8000/v1``.
- ``CHUNKLAB_REMOTE_MODEL``: the served model's name; unset, the server's only model.
- ``CHUNKLAB_REMOTE_API_KEY`` (else ``OPENAI_API_KEY``): sent as a bearer token. It is held by
  the HTTP client only: never in :class:`ModelInfo`, cache keys, ``repr``, logs or error
  messages (any text that comes back from the server is scrubbed of it too).
- ``CHUNKLAB_REMOTE_TIMEOUT``: seconds to wait for an answer (default 60; connecting gives
  up after 5 s), ``CHUNKLAB_REMOTE_RETRIES``: retries of failed requests (default 1).
- ``CHUNKLAB_REMOTE_CONCURRENCY``: requests in flight at once (default 8, 1 to 64).

Concurrency. Independent requests (the groups of :meth:`RemoteScorer.conditional_nll`) go out
through a thread pool of at most ``concurrency`` threads, no more than that many submitted
ahead of the answer being read, and are read back in the order they were sent: values,
progress reports and the first error are the same as one at a time (a new scorer sends its first
request alone, until an answer shows whether the server gives prompt log-probs by ``echo`` or by
``prompt_logprobs``). A ``progress`` callback
that raises (:class:`~backend.errors.Cancelled`) stops the submitting, cancels the requests
not yet sent and waits for those in flight, so no thread outlives the call. Each request
keeps the client's retry and back-off on 429 and 5xx. One ``openai`` client is shared by the
threads (its ``httpx`` client is thread-safe and pools connections). Pointed at several
servers behind one load balancer, ``concurrency`` is what keeps them all busy.
:meth:`RemoteScorer.token_nll` stays sequential within one text: each request's cut depends
on the previous answer (step 3 below); score several texts at once for more.

The client, its retry policy, model discovery and error messages are the ones chat uses
(:mod:`backend.models.openai_compat`).

Failures. Each is one :class:`~backend.errors.ModelError` line without the key: an HTTP error
once the retries are spent, no answer within the timeout (retried too), an answer cut short
(a body that is not complete JSON, or a connection closed in the middle of it; not retried),
an answer of the wrong shape. With several requests in flight the first failure in order is
raised once the others have ended. The caller's caches (:mod:`backend.models.scoring`) only
ever store finished values, so a failed request leaves nothing behind and a rerun asks again.

On the CLI the model flag ``--lm remote`` (:data:`REMOTE_LM`) selects this scorer, configured
by the ``CHUNKLAB_REMOTE_*`` variables.

Token offsets. ``text_offset`` is the running sum of the decoded tokens' lengths, so it is
exact when the tokens spell the text. A leading special token (``<s>``) that is not part of
the text is dropped and the offsets shifted; when tokens do not spell the text (a character
split across byte-level tokens decodes as U+FFFD), the tokens are aligned to the text one by
one instead, and a fragment gets the position of the character it belongs to.

Long texts (:meth:`RemoteScorer.token_nll`). The server's tokenizer is out of reach, so the
text is cut in characters, and the window is kept in tokens by checking each answer:

1. Each request sends a piece of the text preceded by about half a window of the text
   before it as context (the "strided" perplexity of the Hugging Face guide, also the local
   scorer's default ``block = window // 2``). Only the tokens that start inside the piece
   are kept, so every token is scored exactly once, with up to a window of context.
2. Sizes in characters come from tokens through the characters-per-token ratio of the
   previous answer (4 to start with, 0.9 of the measured ratio after).
3. An answer with more than ``window`` tokens is cut after its first ``window`` tokens; the
   next request starts at the first token left out. An answer that says the prompt is too
   long for the server halves the ratio and retries.
4. Cuts are put just before whitespace, where BPE tokenizers start tokens, so a token
   rarely straddles a cut; one that does is scored in the request where the piece ends (cut
   short there) and dropped from the next one.

Within one window the numbers equal a single forward pass (so the local scorer's, to float
rounding). Past it, the local scorer's windows are measured in its own tokens and these in
characters, so the context of a token differs a little and the two agree only closely.

Heavy modules (``openai``, ``httpx``) load on first use.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from backend import config
from backend.errors import ModelError, ParameterError
from backend.models.openai_compat import (
    RemoteClient,
    Service,
    check_answer_model,
    error_text,
    in_order,
    whole_number,
)
from backend.models.types import ModelInfo, TokenScores
from backend.progress import Progress

if TYPE_CHECKING:
    from openai import OpenAI

_Answer = list[tuple[list[int], list["float | None"]]]

__all__ = ["RemoteScorer", "SCORER_SERVICE", "DEFAULT_WINDOW", "PAIRS_PER_REQUEST", "REMOTE_LM", "is_remote_lm", "token_starts"]

log = logging.getLogger(__name__)

DEFAULT_WINDOW = 2048  # tokens per request when the server does not say its context length
PAIRS_PER_REQUEST = 8  # conditional_nll prompts sent in one completions request
TOP_LOGPROBS = 20  # the most vLLM and OpenAI return per position
_MIN_WINDOW = 16
_MAX_SHRINKS = 6  # "prompt too long" answers (or overfull windows) in a row before giving up
_START_CHARS_PER_TOKEN = 4.0
_TOO_LONG = re.compile(r"context length|too long|maximum.{0,40}tokens|exceeds", re.IGNORECASE)
_ECHO, _PROMPT_LOGPROBS = "echo", "prompt_logprobs"  # the two ways a server may give prompt log-probs


REMOTE_LM = "remote"
"""The model spec (``--lm remote``) that means this scorer, on the ``CHUNKLAB_REMOTE_*`` server."""


def is_remote_lm(spec: str | None) -> bool:
    """Whether a language-model spec asks for the remote scorer (``remote``, any case)."""
    return spec is not None and spec.strip().lower() == REMOTE_LM


SCORER_SERVICE = Service(
    label="remote scorer",
    base_url=config.remote_base_url,
    model=config.remote_model,
    api_key=config.remote_api_key,
    timeout=config.remote_timeout,
    retries=config.remote_retries,
    connect_timeout=5.0,
    timeout_setting="CHUNKLAB_REMOTE_TIMEOUT",
    key_setting="CHUNKLAB_REMOTE_API_KEY",
    model_hint="give the model name",
    missing="no remote scorer URL: enter one or set CHUNKLAB_REMOTE_BASE_URL (e.g. http://host:8000/v1)",
    needs_url=True,
)
"""The remote scorer's settings: ``CHUNKLAB_REMOTE_*``, falling back to ``OPENAI_BASE_URL``/``OPENAI_API_KEY``."""


class RemoteScorer(RemoteClient):
    """The :class:`~backend.models.types.Scorer` protocol over an OpenAI-compatible server.

    Built as every :class:`~backend.models.openai_compat.RemoteClient` is, on the
    ``CHUNKLAB_REMOTE_*`` settings (:data:`SCORER_SERVICE`). Creating one asks the server for
    its models (``GET /models``): a wrong URL, port, key or model name fails here, as a
    one-line :class:`ModelError`, rather than at the first score.

    Attributes:
        info: ``kind="remote-lm"``, ``device="remote"``, ``dtype="remote"``, ``source`` the base
            URL (for display); ``fingerprint`` the served model's identity
            (``ServedModel.fingerprint("remote-lm")``, no URL in it); ``context_length`` the
            server's ``max_model_len`` when it reports one.
    """

    service = SCORER_SERVICE

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        retries: int | None = None,
        concurrency: int | None = None,
    ) -> None:
        """Connect to the server (the settings as :class:`~backend.models.openai_compat.RemoteClient` takes them).

        Args:
            concurrency: Requests in flight at once, 1 to 64 (default
                ``CHUNKLAB_REMOTE_CONCURRENCY`` or 8).

        Raises:
            ModelError: unreachable server, rejected key, unknown model, or no base URL.
            ParameterError: ``concurrency`` outside 1 to 64.
        """
        super().__init__(base_url, model, api_key, timeout=timeout, retries=retries)
        self.concurrency: int = whole_number(
            "concurrency", concurrency, config.remote_concurrency, config.MAX_REMOTE_CONCURRENCY
        )
        endpoint = self.endpoint()
        self._endpoint = endpoint
        self.base_url: str = endpoint.base_url or ""  # needs_url: resolve() gave one
        self._client: OpenAI = endpoint.client()
        self._chars_per_token = _START_CHARS_PER_TOKEN
        served = endpoint.discover(self._client)
        self._served = served
        self._mode: str | None = None  # _ECHO or _PROMPT_LOGPROBS once an answer has shown which works
        self.model = served.name
        self.info = ModelInfo(
            name=self.model,
            source=self.base_url,
            kind="remote-lm",
            parameters=0,
            device="remote",
            dtype="remote",
            fingerprint=served.fingerprint("remote-lm"),
            context_length=served.context_length,
        )

    def __repr__(self) -> str:
        return f"RemoteScorer(base_url={self.base_url!r}, model={self.model!r})"

    # --- plumbing ---------------------------------------------------------------------------

    @property
    def prompt_mode(self) -> str | None:
        """How this server gives prompt log-probs (``"echo"`` or ``"prompt_logprobs"``); None until an answer said."""
        return self._mode

    def _scored(self, prompts: list[str]) -> _Answer:
        """For each prompt: the start offset and log-prob of each of its tokens, in prompt order.

        By ``echo`` until the server shows it gives none that way, then by vLLM's
        ``prompt_logprobs``; the way that worked is used from then on.
        """
        reasons = []
        if self._mode != _PROMPT_LOGPROBS:
            answer, reason = self._by_echo(prompts)
            if answer is not None:
                self._mode = _ECHO
                return answer
            reasons.append(reason)
        if self._mode != _ECHO:
            answer, reason = self._by_prompt_logprobs(prompts)
            if answer is not None:
                self._mode = _PROMPT_LOGPROBS
                return answer
            reasons.append(reason)
        raise ModelError(
            f"{self._endpoint.where} returned no prompt log-probs for model {self.model!r} ({'; '.join(reasons)}): "
            "scoring needs a server that returns them, as vLLM does (echo=True with logprobs, or its prompt_logprobs "
            "extension); llama.cpp's llama-server, Ollama and OpenAI's API return none (they can still serve chat)"
            + self._endpoint.url_hint
        )

    def _complete(self, prompts: list[str], what: str, **options: Any) -> tuple[Any, str]:
        """A completions answer whose ``model`` is checked, or None and what the server said when it refused ``options``.

        A refusal (HTTP 400 or 422) that is not about the prompt's length means the server does
        not take ``options``; any other failure is a :class:`ModelError`.
        """
        import openai

        try:
            response = self._client.completions.create(
                model=self.model,
                prompt=prompts if len(prompts) > 1 else prompts[0],
                max_tokens=1,
                temperature=0.0,
                **options,
            )
        except (openai.BadRequestError, openai.UnprocessableEntityError) as e:
            said = error_text(e)
            if not _TOO_LONG.search(said):
                return None, f"HTTP {e.status_code}: {self._endpoint.scrub(said)}"
            message = self._endpoint.describe(e, what)
        except (openai.OpenAIError, json.JSONDecodeError) as e:
            message = self._endpoint.describe(e, what)
        else:
            check_answer_model(self._served, getattr(response, "model", None), self._endpoint.where, what)
            return response, ""
        raise ModelError(message)

    def _choices(self, prompts: list[str], response: Any) -> list[Any]:
        """The answer's choices in prompt order; a count that does not match is a ModelError (with the URL hint)."""
        choices = sorted(getattr(response, "choices", None) or [], key=lambda c: c.index)
        if len(choices) != len(prompts):
            raise ModelError(
                f"{self._endpoint.where} answered {len(choices)} choices for {len(prompts)} prompts"
                + (self._endpoint.url_hint or " (not an OpenAI completions answer)")
            )
        return choices

    def _by_echo(self, prompts: list[str]) -> tuple[_Answer | None, str]:
        """The prompts' tokens by ``echo=True, logprobs=1``; None and why when the answer holds none."""
        what = "a completions request"
        response, refused = self._complete(prompts, what, echo=True, logprobs=1)
        if response is None:
            return None, f"echo refused, {refused}"
        try:
            answer = self._read_echo(prompts, response)
        except (AttributeError, TypeError, ValueError) as e:  # fields missing or of the wrong type
            message = self._malformed(what, e)
        else:
            return answer, "" if answer is not None else "echo ignored"
        raise ModelError(message)

    def _by_prompt_logprobs(self, prompts: list[str]) -> tuple[_Answer | None, str]:
        """The prompts' tokens by vLLM's ``prompt_logprobs`` extension; None and why when the answer holds none."""
        what = "a completions request with prompt_logprobs"
        response, refused = self._complete(prompts, what, extra_body={"prompt_logprobs": 0})
        if response is None:
            return None, f"prompt_logprobs refused, {refused}"
        choices = self._choices(prompts, response)
        out = []
        try:
            for prompt, c in zip(prompts, choices):
                entries = getattr(c, "prompt_logprobs", None)
                if entries is None:
                    entries = (getattr(c, "model_extra", None) or {}).get("prompt_logprobs")
                if not entries:
                    return None, "prompt_logprobs ignored"
                out.append(_prompt_logprob_tokens(prompt, entries))
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            message = self._malformed(what, e)
        else:
            return out, ""
        raise ModelError(message)

    def _malformed(self, what: str, e: BaseException) -> str:
        """The one line for an answer to ``what`` that parsed as JSON but lacks a field or has one of the wrong type."""
        detail = self._endpoint.scrub(f"{type(e).__name__}: {e}")
        return f"{self._endpoint.where} sent a malformed answer to {what} ({detail})"

    def _read_echo(self, prompts: list[str], response: Any) -> _Answer | None:
        """The prompt tokens' offsets and log-probs of an echo answer; None when it does not hold them."""
        choices = self._choices(prompts, response)
        logprobs = [getattr(c, "logprobs", None) for c in choices]
        if any(lp is None or not lp.tokens or lp.token_logprobs is None or lp.text_offset is None for lp in logprobs):
            return None
        # An echo answer holds every prompt token (usage.prompt_tokens of them, summed over the
        # prompts) and its text starts with the prompt; a server that ignored echo sends the
        # generated token's log-probs only (llama.cpp does).
        usage = getattr(response, "usage", None)
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        if isinstance(prompt_tokens, int) and sum(len(lp.tokens) for lp in logprobs) < prompt_tokens:
            return None
        if not all(_echoes(prompt, c.text, lp.tokens) for prompt, c, lp in zip(prompts, choices, logprobs)):
            return None
        # With one prompt, usage.prompt_tokens says exactly where the prompt's tokens end.
        n_prompt = prompt_tokens if len(prompts) == 1 else None
        out = []
        for prompt, c, lp in zip(prompts, choices, logprobs):
            text = c.text if isinstance(c.text, str) and c.text.startswith(prompt) else prompt
            out.append(_prompt_tokens(prompt, text, lp, n_prompt))
        return out

    def _echo_in_order(self, requests: list[list[str]], each: Callable[[int, _Answer], None]) -> None:
        """:meth:`_scored` of each request, up to ``concurrency`` at once; ``each(k, answer)`` here, in order.

        Until an answer has shown how the server gives prompt log-probs, the first request goes
        alone: otherwise every request of the first wave would try ``echo`` on a server that
        only has ``prompt_logprobs``, a wasted forward pass each.
        """
        first = 0
        if self._mode is None and requests:
            each(0, self._scored(requests[0]))
            first = 1
        in_order(self._scored, requests[first:], lambda k, answer: each(first + k, answer), self.concurrency)

    # --- the Scorer protocol -----------------------------------------------------------------

    def token_nll(self, text: str, *, window: int | None = None, progress: Progress | None = None) -> TokenScores:
        """Score every token of ``text`` once (windowing scheme in the module docstring).

        Args:
            text: The text; its tokenization is the server's.
            window: Tokens per request (context included); default the server's context
                length, else :data:`DEFAULT_WINDOW`.
            progress: ``progress(characters done, len(text))`` after each request; may raise
                :class:`~backend.errors.Cancelled`.

        Raises:
            ParameterError: ``window`` below 16 or above the server's context length.
            ModelError: the server fails or returns no prompt log-probs.
        """
        progress = progress or Progress()
        ctx_len = self.info.context_length
        w = int(window) if window is not None else (ctx_len or DEFAULT_WINDOW)
        if w < _MIN_WINDOW:
            raise ParameterError(f"window ({w}) must be at least {_MIN_WINDOW} tokens")
        if ctx_len is not None and w > ctx_len:
            raise ParameterError(f"window ({w}) must be at most the model's context length ({ctx_len})")
        # Prompt tokens per request: the whole window, less the generated token's place when
        # the window is the server's whole context.
        limit = w - 1 if ctx_len is not None and w >= ctx_len else w
        n = len(text)
        starts: list[int] = []
        nll: list[float] = []
        pos = 0  # the first character not yet scored
        retries = 0
        while pos < n:
            budget = max(2, int(limit * self._chars_per_token))  # characters expected to fill the window
            # About half the budget of context before pos, starting at a word (3/4 to all of it).
            want = max(1, budget // 2)
            ctx = 0 if pos <= want else _snap(text, pos - want + want // 4, lo=pos - want)
            room = max(1, budget - (pos - ctx))
            # The piece ends before whitespace, giving up at most a quarter of its length for it.
            end = n if pos + room >= n else _snap(text, pos + room, lo=max(pos + 1, pos + room - room // 4))
            try:
                ((offs, values),) = self._scored([text[ctx:end]])
            except ModelError as e:
                if not _TOO_LONG.search(str(e)) or retries >= _MAX_SHRINKS:
                    raise
                retries += 1
                self._chars_per_token /= 2
                continue
            if offs:
                self._chars_per_token = max(0.25, 0.9 * (end - ctx) / len(offs))
            if len(offs) > limit:
                # More tokens than the window holds: keep the first ``limit``; the next request
                # starts at the first token left out.
                cut = ctx + offs[limit]
                if cut <= pos:  # the context alone filled the window: retry with the new ratio
                    retries += 1
                    if retries > _MAX_SHRINKS:
                        raise ModelError(f"remote scorer at {self.base_url}: cannot fit a {w}-token window")
                    continue
                k = sum(1 for o in offs[:limit] if ctx + o < cut)
                offs, values, end = offs[:k], values[:k], cut
            retries = 0
            for o, v in zip(offs, values):
                if ctx + o >= pos or pos == 0:
                    starts.append(ctx + o)
                    nll.append(math.nan if v is None else -float(v))
            pos = end
            progress(pos, n)
        s = np.asarray(starts, dtype=np.int64)
        ends = np.append(s[1:], n).astype(np.int64) if s.size else np.zeros(0, dtype=np.int64)
        return TokenScores(starts=s, ends=ends, nll=np.asarray(nll, dtype=np.float64), window=w)

    def conditional_nll(self, pairs: Sequence[tuple[str, str]], *, progress: Progress | None = None) -> list[float]:
        """Mean NLL of each continuation ``q`` given its context ``d``.

        ``d + q`` goes to the server as one prompt and the log-probs of the tokens holding at
        least one character of ``q`` are averaged. Unlike
        :class:`~backend.models.scorer.LocalScorer`, which tokenizes ``d`` and ``q`` separately,
        the server tokenizes the joined text: a token that straddles the join (``"back"`` +
        ``"ground"`` as one token) counts as q's, with its whole log-prob. At a sentence
        boundary (``d`` ends in punctuation, ``q`` starts with a space) the two tokenizations
        agree and so do the scores. As in the local scorer an empty ``d`` becomes one space;
        if it then merges with q's first token (``" An"``), that token is the prompt's first
        and has no log-prob, so q's first token goes unscored here. An empty ``q`` gives ``nan``.

        Raises:
            ParameterError: a pair that is not two strings.
            ModelError: the server fails or returns no prompt log-probs.
        """
        for i, pair in enumerate(pairs):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
                raise ParameterError(f"pair {i} must be a (context, continuation) pair of strings, got {pair!r}")
        out = [math.nan] * len(pairs)
        contexts = [d if d else " " for d, _ in pairs]
        todo = [i for i, (_, q) in enumerate(pairs) if q]
        progress = progress or Progress()
        progress(len(pairs) - len(todo), len(pairs))
        batches = [todo[b : b + PAIRS_PER_REQUEST] for b in range(0, len(todo), PAIRS_PER_REQUEST)]
        requests = [[contexts[i] + pairs[i][1] for i in batch] for batch in batches]

        def take(k: int, answer: _Answer) -> None:
            for i, prompt, (starts, values) in zip(batches[k], requests[k], answer):
                cut = len(contexts[i])
                ends = [*starts[1:], len(prompt)]
                kept = [-float(v) for e, v in zip(ends, values) if e > cut and v is not None]
                out[i] = float(np.mean(kept)) if kept else math.nan
            progress(len(pairs) - len(todo) + min((k + 1) * PAIRS_PER_REQUEST, len(todo)), len(pairs))

        self._echo_in_order(requests, take)
        return out

    def next_token_probs(self, prompt: str | list[dict[str, str]], candidates: Sequence[str]) -> dict[str, float]:
        """Probability of each candidate as the next token, from the server's top log-probs.

        A string prompt goes to the completions endpoint; a list of chat messages to chat
        completions (the server applies its chat template), and, where that endpoint gives
        no log-probs, to completions as ``role: content`` lines. The server reports only its
        :data:`TOP_LOGPROBS` likeliest tokens, so a candidate outside them gets 0. A candidate
        matches the reported token equal to it, else one equal to it once whitespace is
        stripped (``" Yes"`` for ``"Yes"``), else the longest one it starts with (its first
        token, as the local scorer counts it).

        Raises:
            ParameterError: no candidates, or an empty one.
            ModelError: the server fails or returns no top log-probs.
        """
        if isinstance(candidates, str) or not candidates:
            raise ParameterError(f"candidates must be a non-empty list of strings, got {candidates!r}")
        bad = next((c for c in candidates if not isinstance(c, str) or not c), None)
        if bad is not None:
            raise ParameterError(f"candidate {bad!r} has no token")
        top = None
        if isinstance(prompt, list):
            top = self._chat_top(prompt)
            if top is None:
                prompt = "".join(f"{m.get('role', 'user')}: {m.get('content', '')}\n" for m in prompt) + "assistant:"
        if top is None:
            top = self._completion_top(str(prompt))
        probs = {t: math.exp(v) for t, v in top.items() if v is not None}
        return {c: _candidate_prob(c, probs) for c in candidates}

    def _chat_top(self, messages: list[dict[str, str]]) -> dict[str, float | None] | None:
        import openai

        try:
            response = self._client.chat.completions.create(
                model=self.model,
                messages=messages,
                max_tokens=1,
                temperature=0.0,
                logprobs=True,
                top_logprobs=TOP_LOGPROBS,
            )
        except (openai.NotFoundError, openai.BadRequestError, openai.UnprocessableEntityError):
            return None  # no chat endpoint, or no log-probs on it: fall back to completions
        except (openai.OpenAIError, json.JSONDecodeError) as e:
            message = self._endpoint.describe(e, "a chat request")
        else:
            message = None
        if message is not None:
            raise ModelError(message)
        check_answer_model(self._served, getattr(response, "model", None), self._endpoint.where, "a chat request")
        try:
            choice = (response.choices or [None])[0]
            content = getattr(getattr(choice, "logprobs", None), "content", None)
            if not content:
                return None
            return {str(t.token): _logprob(t.logprob) for t in (content[0].top_logprobs or [])}
        except (AttributeError, TypeError, ValueError) as e:
            message = self._malformed("a chat request", e)
        raise ModelError(message)

    def _completion_top(self, prompt: str) -> dict[str, float | None]:
        response = self._endpoint.call(
            "a completions request",
            self._client.completions.create,
            model=self.model,
            prompt=prompt,
            max_tokens=1,
            temperature=0.0,
            logprobs=TOP_LOGPROBS,
        )
        check_answer_model(self._served, getattr(response, "model", None), self._endpoint.where, "a completions request")
        choice = (getattr(response, "choices", None) or [None])[0]
        lp = getattr(choice, "logprobs", None)
        tops = getattr(lp, "top_logprobs", None)
        if not tops or not tops[0]:
            raise ModelError(
                f"{self._endpoint.where} returned no top log-probs for model {self.model!r}" + self._endpoint.url_hint
            )
        try:
            return {str(t): _logprob(v) for t, v in dict(tops[0]).items()}
        except (AttributeError, TypeError, ValueError) as e:
            message = self._malformed("a completions request", e)
        raise ModelError(message)


# --- helpers ------------------------------------------------------------------------------------


def _logprob(value: Any) -> float | None:
    """A reported log-prob as a float (None stays None); raises TypeError/ValueError on anything else."""
    return None if value is None else float(value)


def _snap(text: str, i: int, lo: int) -> int:
    """The last cut in ``(lo, i]`` that falls just before whitespace following a non-space, else ``i``."""
    for c in range(i, max(lo, 1) - 1, -1):
        if c < len(text) and text[c].isspace() and not text[c - 1].isspace():
            return c
    return i


def _echoes(prompt: str, text: Any, tokens: Any) -> bool:
    """Whether an echo answer's choice holds the prompt: its text starts with it, or its tokens spell most of it."""
    if isinstance(text, str) and text.startswith(prompt):
        return True
    spelled = sum(len(_readable(t)) for t in tokens if isinstance(t, str))
    return len(tokens) > 1 and 2 * spelled >= len(prompt)


def _prompt_logprob_tokens(prompt: str, entries: Any) -> tuple[list[int], list[float | None]]:
    """Start offset (in ``prompt``) and log-prob of each prompt token of a vLLM ``prompt_logprobs`` list.

    ``entries[0]`` is None (the first token has no context) and says nothing of that token;
    each later entry maps token ids to ``{"logprob", "rank", "decoded_token"}``, the prompt's
    own token first (vLLM lists it before the top others). The first token is whatever of the
    prompt comes before the second: nothing means it was a special token (``<s>``), dropped.
    """
    tokens: list[str] = []
    values: list[float | None] = []
    for entry in list(entries)[1:]:
        if not isinstance(entry, dict) or not entry:
            raise ValueError(f"a prompt_logprobs entry is {entry!r}, not a token's log-prob")
        own = next(iter(entry.values()))
        token = own.get("decoded_token") if isinstance(own, dict) else None
        if not isinstance(token, str):
            raise ValueError("prompt_logprobs has no decoded_token (the server must detokenize)")
        tokens.append(token)
        values.append(float(own["logprob"]))
    spelled = "".join(tokens)
    if prompt.endswith(spelled):  # the tokens spell the text: offsets are exact
        lead = len(prompt) - len(spelled)
        rest = [lead + o for o in _running(tokens)]
    else:
        rest = token_starts(prompt, ["", *tokens])[1:]  # the unknown first token waits for the second
        lead = rest[0] if rest else len(prompt)
    if lead == 0 and tokens:
        return rest, values  # the first token is no part of the text
    return [0, *rest], [None, *values]


def _prompt_tokens(prompt: str, echoed: str, lp: Any, n_prompt: int | None) -> tuple[list[int], list[float | None]]:
    """Start offset (in ``prompt``) and log-prob of each prompt token of an echo answer.

    Args:
        prompt: The prompt sent.
        echoed: The answer's text (the prompt followed by the generated text).
        lp: The answer's ``logprobs`` (``tokens``, ``token_logprobs``, ``text_offset``).
        n_prompt: How many of the tokens are the prompt's, when the server said so
            (``usage.prompt_tokens``); else the tokens that start inside the prompt, less the
            generated one.
    """
    tokens = [t if isinstance(t, str) else "" for t in lp.tokens]
    offsets = [int(o) for o in lp.text_offset]
    values = list(lp.token_logprobs)
    if not (len(tokens) == len(offsets) == len(values)):
        raise ModelError("the remote answer's tokens, token_logprobs and text_offset differ in length")
    # A leading special token (<s>) is no part of the text: drop it, and shift the offsets.
    first = lead = 0
    if tokens and values[0] is None and tokens[0] and not echoed.startswith(_readable(tokens[0])):
        first, lead = 1, len(tokens[0])
    toks = tokens[first:]
    if n_prompt is not None and first <= n_prompt <= len(tokens):
        k = n_prompt - first
    else:
        k = sum(1 for x in token_starts(echoed, toks) if x < len(prompt))
        k = min(k, max(0, len(toks) - 1))  # max_tokens=1: the last token is the generated one
    toks = toks[:k]
    if "".join(toks) == prompt and [o - lead for o in offsets[first : first + k]] == _running(toks):
        starts = _running(toks)  # text_offset is exact: the tokens spell the text
    else:
        starts = token_starts(prompt, toks)
    return starts, values[first : first + k]


def _running(tokens: list[str]) -> list[int]:
    out, pos = [], 0
    for t in tokens:
        out.append(pos)
        pos += len(t)
    return out


_MARKERS = str.maketrans({"\u2581": " ", "\u0120": " ", "\u010a": "\n"})  # SentencePiece ▁, byte-level Ġ Ċ


def _readable(token: str) -> str:
    """What a token shows of the text: markers turned back into spaces, U+FFFD fragments removed."""
    return token.translate(_MARKERS).replace("\ufffd", "")


def token_starts(text: str, tokens: list[str]) -> list[int]:
    """Start of each token in ``text`` when the tokens do not spell it exactly.

    A token that reads as the text at the current position starts there. Fragments (part of
    a character, decoded as U+FFFD) wait until the next readable token is found a little
    further on; the characters skipped meanwhile are shared out among them in order.
    """
    starts = [0] * len(tokens)
    pending: list[int] = []
    pos = 0

    def place(until: int) -> None:
        m = len(pending)
        for r, idx in enumerate(pending):
            starts[idx] = pos + (until - pos) * r // m
        pending.clear()

    for i, t in enumerate(tokens):
        if t and text.startswith(t, pos):
            place(pos)
            starts[i] = pos
            pos += len(t)
            continue
        clean = _readable(t)
        j = text.find(clean, pos, pos + len(clean) + 2 * len(pending) + 8) if clean else -1
        if j < 0:
            pending.append(i)
            continue
        # A token that begins with a fragment completes the character just before its text.
        head = j - 1 if t.startswith("\ufffd") and j > pos else j
        place(head)
        starts[i] = head
        pos = j + len(clean)
    place(len(text))
    return starts


def _candidate_prob(candidate: str, probs: dict[str, float]) -> float:
    if candidate in probs:
        return probs[candidate]
    stripped = candidate.strip()
    same = [p for t, p in probs.items() if t.strip() == stripped and stripped]
    if same:
        return max(same)
    prefixes = [(len(t.strip()), p) for t, p in probs.items() if t.strip() and stripped.startswith(t.strip())]
    return max(prefixes)[1] if prefixes else 0.0
