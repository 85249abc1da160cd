"""A small OpenAI-compatible HTTP server whose log-probs come from the bundled SmolLM2.

This is Chunk Lab's own test server, not vLLM: it speaks the parts of the OpenAI protocol
that :class:`backend.models.remote.RemoteScorer` uses, the way vLLM answers them, so the
remote code path runs end to end (HTTP, the ``openai`` client, JSON, offsets) against real
numbers that the local scorer can be checked against:

- ``GET /v1/models``: the served model, with vLLM's ``max_model_len`` (and ``also_listed``:
  more names listed beside it);
- ``POST /v1/completions``: ``prompt`` (a string or a list), ``echo``, ``logprobs`` (top-k),
  ``max_tokens`` (greedy; 0 allowed); with ``echo`` the prompt tokens come back with their
  log-probs (``null`` for the first), vLLM-style ``text_offset`` (running sum of the decoded
  tokens' lengths) and top log-probs; vLLM's ``prompt_logprobs`` extension (``extra_body``)
  puts ``choices[i].prompt_logprobs`` in the answer: ``null`` for the first prompt token, then
  per token a dict keyed by token id (as a string) of ``{"logprob", "rank", "decoded_token"}``,
  the prompt token first, then the top ``prompt_logprobs`` others; a prompt longer than
  ``max_model_len`` is refused with vLLM's "maximum context length" message (HTTP 400);
- ``scoring`` (:data:`SCORING`), how completions treat the prompt's log-probs: ``"vllm"``
  (both ``echo`` and ``prompt_logprobs``, as vLLM), ``"prompt_logprobs"`` (only the extension:
  ``echo`` is ignored as below), ``"echo_ignored"`` (llama.cpp's llama-server: ``echo`` and the extension
  ignored, the text and log-probs of the generated tokens only), ``"echo_refused"`` (HTTP 400
  "Only no echo is supported", as other llama.cpp builds answer) and ``"none"`` (no ``logprobs``
  at all);
- ``llama_routes``: also llama.cpp's routes without ``/v1``: ``GET /models`` (the same listing)
  and its own ``POST /completions``, whose answer is not OpenAI's (``content``, no ``choices``),
  as a client pointed at a URL without ``/v1`` meets it;
- ``bos``: completions prompts start with a special token that is no part of the text (the
  tokenizer's BOS, as Llama's do), echoed and scored like the rest; ``raw_pieces``: the
  ``decoded_token`` of ``prompt_logprobs`` is the vocabulary's piece (``Ġworld``), as older
  vLLM releases sent it, rather than the token decoded alone;
- ``listing``: False answers ``GET /v1/models`` with HTTP 404, as servers without the endpoint;
- ``ignore_model``: answer whatever ``model`` is asked for, naming the served model in the
  answer (llama.cpp's habit); ``answer_model``: the name answers give (default the served one);
- ``POST /v1/chat/completions``: the model's chat template, ``logprobs``/``top_logprobs``;
  without ``logprobs`` the answer is a greedy ``generate`` with a KV cache, up to the server's
  ``max_chat_tokens`` (default 16; raise it for longer answers, e.g. question generation);
- ``Authorization: Bearer <key>`` is checked when the server has a key: a wrong or missing key
  gets HTTP 401 with OpenAI's "Incorrect API key provided: <key>" message, which echoes the
  key on purpose (the client must not repeat it);
- ``delay``: seconds each POST waits before it is answered, outside the model's lock, as the
  network and a busy GPU server would; requests are served on one thread each, so
  concurrent clients overlap their waits (``bench/bench_remote.py`` measures that). The
  server counts the POSTs in flight and the most there ever were at once (``peak_in_flight``);
- ``memo``: a completions request seen before gets its first answer again without the model,
  so a benchmark's timed runs measure the client and the delay, not this machine's CPU;
- faults (:meth:`RunningServer.inject`), answered to every POST until turned off: ``"500"``
  (HTTP 500 with an OpenAI-style error body), ``"slow"`` (the real answer, but only after
  ``seconds``: past a client's timeout) and ``"truncated"`` (HTTP 200 whose JSON body is cut
  in half, its ``Content-Length`` matching what is sent, as a proxy that gave up would).
  ``faulted`` counts the POSTs that got one.

Log-probs come from one float32 forward pass of the whole prompt through the model that
:func:`backend.models.lm.load_lm` loads (the same weights and tokenizer as the local
scorer), so remote and local numbers agree to float rounding on texts within one window.

Use it in-process (``with start_server() as server: server.url``) or as a process::

    python -m tests.support.openai_compat_server --port 8765 --api-key secret
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from tests.support.openai_handler import ApiError, JsonHandler, stop_server

__all__ = ["Engine", "RunningServer", "start_server", "main", "FAULTS", "SCORING"]

MAX_GENERATED = 16  # greedy tokens per request, enough for the protocol, cheap on a CPU
FAULTS = (None, "500", "slow", "truncated")
SCORING = ("vllm", "prompt_logprobs", "echo_ignored", "echo_refused", "none")


@dataclass
class Engine:
    """The bundled (or another local) causal LM behind the server's endpoints."""

    spec: str | None = None
    served_name: str | None = None
    max_model_len: int | None = None
    _lm: Any = field(default=None, init=False, repr=False)

    def load(self) -> Engine:
        """Load the model (once)."""
        if self._lm is None:
            from backend.models.lm import load_lm

            self._lm = load_lm(self.spec, device="cpu")
            if self.served_name is None:
                self.served_name = self._lm.info.name
            if self.max_model_len is None:
                self.max_model_len = self._lm.info.context_length or 2048
        return self

    @property
    def name(self) -> str:
        return str(self.load().served_name)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` as the local scorer tokenizes it (no special tokens)."""
        return list(self.load()._lm.tokenizer(text, add_special_tokens=False)["input_ids"])

    @property
    def bos_id(self) -> int:
        """The special token a ``bos`` server puts before every completions prompt."""
        tok = self.load()._lm.tokenizer
        return int(tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id)

    def raw_piece(self, token_id: int) -> str:
        """A token as its vocabulary piece (byte-level ``Ġ`` for a space), as older vLLM releases reported it."""
        return str(self.load()._lm.tokenizer.convert_ids_to_tokens(token_id))

    def token_text(self, token_id: int) -> str:
        """A token as vLLM reports it: decoded alone (part of a character reads U+FFFD)."""
        return self.load()._lm.tokenizer.decode([token_id])

    def chat_prompt(self, messages: list[dict[str, str]]) -> str:
        """``messages`` rendered with the model's chat template, ready for the answer."""
        tok = self.load()._lm.tokenizer
        return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def generate(self, prompt: str, max_tokens: int) -> tuple[list[int], list[int], bool]:
        """Prompt ids, greedily generated ids (KV-cached ``generate``), and whether it stopped at EOS."""
        import torch

        lm = self.load()._lm
        ids = self.encode(prompt)
        if not ids:
            raise ApiError(400, "the prompt is empty")
        _check_length(self, len(ids), max_tokens)
        eos = lm.tokenizer.eos_token_id
        with lm.lock, torch.inference_mode():
            x = torch.tensor([ids], dtype=torch.long, device=lm.model.device)
            out = lm.model.generate(
                input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=max_tokens, do_sample=False,
                pad_token_id=eos, temperature=None, top_p=None, top_k=None,
            )
        gen = [int(t) for t in out[0, len(ids):].tolist()]
        stopped = bool(gen) and gen[-1] == eos
        return ids, gen[:-1] if stopped else gen, stopped

    def log_softmax(self, ids: list[int]) -> Any:
        """Log-probabilities of the next token after every prefix of ``ids`` (shape len(ids) × vocab)."""
        import torch

        lm = self.load()._lm
        with lm.lock, torch.inference_mode():
            x = torch.tensor([ids], dtype=torch.long, device=lm.model.device)
            logits = lm.model(input_ids=x).logits[0].float()
        return torch.log_softmax(logits, dim=-1).cpu()


class _Handler(JsonHandler):
    server: _Server  # type: ignore[assignment]

    def _json(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError as e:
            raise ApiError(400, f"invalid JSON body: {e}") from e
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object")
        return body

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        try:
            self.authorize()
            models = ("/v1/models", "/models") if self.server.llama_routes else ("/v1/models",)
            if self.path.rstrip("/") not in models or not self.server.listing:
                raise ApiError(404, f"no route {self.path}", "not_found_error")
            engine = self.server.engine
            names = [engine.name, *self.server.also_listed]
            self.send_json(200, {"object": "list", "data": [{
                "id": name, "object": "model", "created": 0, "owned_by": "chunklab-tests",
                "max_model_len": engine.max_model_len,
            } for name in names]})
        except ApiError as e:
            self.send_error_answer(e)

    def do_POST(self) -> None:  # noqa: N802
        server = self.server
        with server.counter_lock:
            server.in_flight += 1
            server.peak_in_flight = max(server.peak_in_flight, server.in_flight)
            server.posts += 1
        try:
            fault = server.fault
            if fault is not None:
                with server.counter_lock:
                    server.faulted += 1
            if fault == "slow":
                if server.closing.wait(server.fault_seconds):
                    return  # shutting down: no late answer computed for a client long gone
            elif server.delay > 0:
                time.sleep(server.delay)
            if fault == "500":
                self.rfile.read(int(self.headers.get("Content-Length") or 0))  # the connection stays usable
                self.send_error_answer(ApiError(500, "the model server crashed (injected fault)", "server_error"))
            else:
                self._post()
        except OSError:
            pass  # the client gave up (a "slow" answer past its timeout): nobody is left to answer
        finally:
            with server.counter_lock:
                server.in_flight -= 1

    def _post(self) -> None:
        try:
            self.authorize()
            body = self._json()
            path = self.path.rstrip("/")
            if path == "/v1/completions":
                self.send_json(200, self._completions(body))
            elif path == "/completions" and self.server.llama_routes:
                self.send_json(200, _native_completion(self.server.engine, body))
            elif path == "/v1/chat/completions":
                if not self.server.chat:
                    raise ApiError(404, f"no route {self.path}", "not_found_error")
                self._check_model(body)
                answer = _chat(self.server.engine, body, self.server.max_chat_tokens)
                self.send_json(200, {**answer, "model": self.server.answer_model or answer["model"]})
            else:
                raise ApiError(404, f"no route {self.path}", "not_found_error")
        except ApiError as e:
            self.send_error_answer(e)


    def _check_model(self, body: dict[str, Any]) -> None:
        if not self.server.ignore_model:
            _check_model(self.server.engine, body)

    def _completions(self, body: dict[str, Any]) -> dict[str, Any]:
        server = self.server
        self._check_model(body)
        if server.scoring == "echo_refused" and body.get("echo"):
            raise ApiError(400, "Only no echo is supported")
        answer = server.answers.get(json.dumps(body, sort_keys=True)) if server.memo else None
        if answer is None:
            answer = _completions(server.engine, body, server.scoring, bos=server.bos, raw_pieces=server.raw_pieces)
            if server.memo:
                with server.counter_lock:
                    server.answers.setdefault(json.dumps(body, sort_keys=True), answer)
        return {**answer, "model": server.answer_model or answer["model"]}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], engine: Engine, api_key: str | None, chat: bool, scoring: str,
        max_chat_tokens: int = MAX_GENERATED, delay: float = 0.0, memo: bool = False, *,
        ignore_model: bool = False, answer_model: str | None = None, also_listed: tuple[str, ...] = (),
        llama_routes: bool = False, listing: bool = True, bos: bool = False, raw_pieces: bool = False,
    ) -> None:
        super().__init__(address, _Handler)
        self.delay = delay
        self.memo = memo
        self.closing = threading.Event()
        self.fault: str | None = None
        self.fault_seconds = 0.0
        self.faulted = 0
        self.answers: dict[str, dict[str, Any]] = {}
        self.counter_lock = threading.Lock()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.posts = 0
        self.engine = engine
        self.api_key = api_key
        self.chat = chat
        self.scoring = scoring
        self.max_chat_tokens = max_chat_tokens
        self.ignore_model = ignore_model
        self.answer_model = answer_model
        self.also_listed = also_listed
        self.llama_routes = llama_routes
        self.listing = listing
        self.bos = bos
        self.raw_pieces = raw_pieces


def _check_model(engine: Engine, body: dict[str, Any]) -> None:
    if body.get("model") != engine.name:
        raise ApiError(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")


def _check_length(engine: Engine, n_prompt: int, max_tokens: int) -> None:
    limit = int(engine.max_model_len or 0)
    if n_prompt + max_tokens > limit:
        raise ApiError(
            400,
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{n_prompt + max_tokens} tokens ({n_prompt} in the messages, {max_tokens} in the completion). "
            "Please reduce the length of the messages or completion.",
            "BadRequestError",
        )


def _top(row: Any, k: int, engine: Engine) -> dict[str, float]:
    import torch

    values, ids = torch.topk(row, k)
    out: dict[str, float] = {}
    for v, i in zip(values.tolist(), ids.tolist()):
        out.setdefault(engine.token_text(int(i)), float(v))  # two ids may decode alike: keep the likelier
    return out


def _run(engine: Engine, prompt: str, max_tokens: int, bos: bool = False) -> tuple[list[int], list[int], Any]:
    """Prompt ids (after a BOS with ``bos``), greedily generated ids, and the log-softmax rows predicting each token after the first."""
    ids = ([engine.bos_id] if bos else []) + engine.encode(prompt)
    if not ids:
        raise ApiError(400, "the prompt is empty")
    _check_length(engine, len(ids), max_tokens)
    generated: list[int] = []
    rows = engine.log_softmax(ids)
    for step in range(max_tokens):
        generated.append(int(rows[-1].argmax()))
        if step + 1 < max_tokens:  # the last token's own row is never needed
            rows = engine.log_softmax(ids + generated)
    return ids, generated, rows


def _completions(
    engine: Engine, body: dict[str, Any], scoring: str = "vllm", *, bos: bool = False, raw_pieces: bool = False
) -> dict[str, Any]:
    prompts = body.get("prompt")
    if isinstance(prompts, str):
        prompts = [prompts]
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise ApiError(400, "prompt must be a string or a list of strings")
    echo = bool(body.get("echo")) and scoring == "vllm"  # the others ignore it: the generated tokens only
    k = body.get("logprobs") if scoring != "none" else None
    prompt_k = body.get("prompt_logprobs") if scoring in ("vllm", "prompt_logprobs") else None
    max_tokens = int(body.get("max_tokens") if body.get("max_tokens") is not None else 16)
    if not 0 <= max_tokens <= MAX_GENERATED:
        raise ApiError(400, f"max_tokens must be between 0 and {MAX_GENERATED} on this test server")
    choices, n_prompt, n_gen = [], 0, 0
    for index, prompt in enumerate(prompts):
        ids, gen, rows = _run(engine, prompt, max_tokens, bos)
        n_prompt += len(ids)
        n_gen += len(gen)
        gen_text = engine.load()._lm.tokenizer.decode(gen)
        choice: dict[str, Any] = {
            "index": index,
            "text": (prompt if echo else "") + gen_text,
            "logprobs": None if k is None else _logprobs(engine, prompt, ids, gen, rows, int(k), echo),
            "finish_reason": "length",
        }
        if prompt_k is not None:
            choice["prompt_logprobs"] = _prompt_logprobs(engine, ids, rows, int(prompt_k), raw_pieces)
        choices.append(choice)
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": engine.name,
        "choices": choices,
        "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_gen, "total_tokens": n_prompt + n_gen},
    }


def _logprobs(engine: Engine, prompt: str, ids: list[int], gen: list[int], rows: Any, k: int, echo: bool) -> dict[str, Any]:
    """OpenAI's ``logprobs`` of a completion choice: the prompt's and generated tokens with ``echo``, else the generated."""
    k = max(1, k)
    seq = (ids + gen) if echo else gen
    first = 0 if echo else len(ids)
    tokens = [engine.token_text(t) for t in seq]
    token_logprobs: list[float | None] = []
    top: list[dict[str, float] | None] = []
    for j, t in enumerate(seq):
        pos = first + j  # position of this token in ids + gen
        if pos == 0:
            token_logprobs.append(None)
            top.append(None)
            continue
        row = rows[pos - 1]
        value = float(row[t])
        token_logprobs.append(value)
        entry = _top(row, k, engine)
        entry.setdefault(tokens[j], value)
        top.append(entry)
    offsets, at = [], 0 if echo else len(prompt)
    for t in tokens:
        offsets.append(at)
        at += len(t)
    return {"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": top, "text_offset": offsets}


def _prompt_logprobs(
    engine: Engine, ids: list[int], rows: Any, k: int, raw_pieces: bool = False
) -> list[dict[str, dict[str, Any]] | None]:
    """vLLM's ``prompt_logprobs`` of a choice: None, then per prompt token its own entry first and the top ``k`` after it."""
    import torch

    name = engine.raw_piece if raw_pieces else engine.token_text
    out: list[dict[str, dict[str, Any]] | None] = [None]
    for pos in range(1, len(ids)):
        row = rows[pos - 1]
        t = ids[pos]
        value = float(row[t])
        entries = {str(t): {"logprob": value, "rank": 1 + int((row > row[t]).sum()), "decoded_token": name(t)}}
        if k > 0:
            values, top_ids = torch.topk(row, k)
            for rank, (v, i) in enumerate(zip(values.tolist(), top_ids.tolist()), start=1):
                entries.setdefault(str(i), {"logprob": float(v), "rank": rank, "decoded_token": name(int(i))})
        out.append(entries)
    return out


def _native_completion(engine: Engine, body: dict[str, Any]) -> dict[str, Any]:
    """llama.cpp's own ``/completion`` answer (not OpenAI's): the generated text as ``content``."""
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise ApiError(400, "prompt must be a string")
    n = max(1, min(int(body.get("n_predict") or body.get("max_tokens") or 1), MAX_GENERATED))
    ids, gen, _rows = _run(engine, prompt, n)
    return {
        "index": 0, "content": engine.load()._lm.tokenizer.decode(gen), "tokens": [], "id_slot": 0, "stop": True,
        "model": engine.name, "tokens_predicted": len(gen), "tokens_evaluated": len(ids), "truncated": False,
    }


def _chat(engine: Engine, body: dict[str, Any], max_chat_tokens: int = MAX_GENERATED) -> dict[str, Any]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list")
    max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
    finish = "length"
    if not body.get("logprobs"):
        max_tokens = max(1, min(max_tokens, max_chat_tokens))
        ids, gen, stopped = engine.generate(engine.chat_prompt(messages), max_tokens)
        finish = "stop" if stopped else "length"
    else:
        max_tokens = max(1, min(max_tokens, MAX_GENERATED))
        ids, gen, rows = _run(engine, engine.chat_prompt(messages), max_tokens)
    content = None
    if body.get("logprobs"):
        k = int(body.get("top_logprobs") or 0)
        content = []
        for j, t in enumerate(gen):
            row = rows[len(ids) + j - 1]
            text = engine.token_text(t)
            tops = [
                {"token": s, "logprob": v, "bytes": list(s.encode("utf-8"))}
                for s, v in (_top(row, k, engine).items() if k else [])
            ]
            content.append({"token": text, "logprob": float(row[t]), "bytes": list(text.encode("utf-8")),
                            "top_logprobs": tops})
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": engine.name,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": engine.load()._lm.tokenizer.decode(gen)},
            "logprobs": None if content is None else {"content": content},
            "finish_reason": finish,
        }],
        "usage": {"prompt_tokens": len(ids), "completion_tokens": len(gen), "total_tokens": len(ids) + len(gen)},
    }


@dataclass
class RunningServer:
    """A server running in a background thread of this process."""

    url: str
    engine: Engine
    _server: _Server = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    @property
    def posts(self) -> int:
        """POST requests received so far."""
        return self._server.posts

    @property
    def peak_in_flight(self) -> int:
        """The most POST requests that were being answered at once."""
        return self._server.peak_in_flight

    @property
    def faulted(self) -> int:
        """POST requests answered with an injected fault so far."""
        return self._server.faulted

    def inject(self, fault: str | None, *, seconds: float = 3.0) -> None:
        """Answer every POST from now on with ``fault`` (see the module docstring); None: answer normally.

        Args:
            fault: ``"500"``, ``"slow"``, ``"truncated"`` or None.
            seconds: How long a ``"slow"`` answer waits.
        """
        if fault not in FAULTS:
            raise ValueError(f"fault must be one of {FAULTS}, got {fault!r}")
        self._server.fault_seconds = seconds
        self._server.fault = fault

    def reset_counts(self) -> None:
        """Start counting POSTs and their peak again from zero."""
        with self._server.counter_lock:
            self._server.posts = 0
            self._server.faulted = 0
            self._server.peak_in_flight = self._server.in_flight

    def close(self) -> None:
        """Stop serving, wait for the answers still being computed, and free the port (see :func:`stop_server`)."""
        self._server.closing.set()
        stop_server(self._server, self._thread)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_server(
    engine: Engine | None = None,
    *,
    api_key: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    chat: bool = True,
    scoring: str = "vllm",
    max_chat_tokens: int = MAX_GENERATED,
    delay: float = 0.0,
    memo: bool = False,
    ignore_model: bool = False,
    answer_model: str | None = None,
    also_listed: tuple[str, ...] = (),
    llama_routes: bool = False,
    listing: bool = True,
    bos: bool = False,
    raw_pieces: bool = False,
) -> RunningServer:
    """Serve ``engine`` (default: the bundled SmolLM2) on ``host:port`` (0: a free port) in a thread.

    Args:
        engine: The model; loaded before the server starts answering.
        api_key: The bearer token clients must send; None accepts any.
        chat: Whether ``/v1/chat/completions`` exists (False: 404, as on servers without it).
        scoring: How completions give the prompt's log-probs, one of :data:`SCORING` (see the
            module docstring): ``"vllm"`` gives them both ways, the others test the client's
            fallback to ``prompt_logprobs`` and its error for servers that give none.
        max_chat_tokens: The longest chat answer without log-probs (greedy generation).
        delay: Seconds each POST waits before it is answered (0: none).
        memo: Answer a completions request seen before with its first answer, without the model.
        ignore_model: Answer any ``model`` asked for (llama.cpp) instead of HTTP 404 for another name.
        answer_model: The ``model`` every answer names (default the served model's name).
        also_listed: More model names ``/v1/models`` lists after the served one.
        llama_routes: Also answer llama.cpp's ``/models`` and native ``/completions`` (no ``/v1``).
        listing: False: no ``/v1/models`` (HTTP 404), so a client must trust the name it asks for.
        bos: Put a BOS token (no part of the text) before every completions prompt.
        raw_pieces: ``prompt_logprobs`` name tokens by vocabulary piece (``Ġworld``), as older vLLM did.
    """
    if not delay >= 0:
        raise ValueError(f"delay ({delay!r}) must be 0 or more seconds")
    if scoring not in SCORING:
        raise ValueError(f"scoring must be one of {SCORING}, got {scoring!r}")
    engine = (engine or Engine()).load()
    server = _Server(
        (host, port), engine, api_key, chat, scoring, max_chat_tokens, delay, memo,
        ignore_model=ignore_model, answer_model=answer_model, also_listed=tuple(also_listed),
        llama_routes=llama_routes, listing=listing, bos=bos, raw_pieces=raw_pieces,
    )
    thread = threading.Thread(target=server.serve_forever, name="openai-compat-server", daemon=True)
    thread.start()
    bound_host, bound_port = server.server_address[:2]
    return RunningServer(url=f"http://{bound_host}:{bound_port}/v1", engine=engine, _server=server, _thread=thread)


def main(argv: list[str] | None = None) -> None:
    """Run the server in the foreground until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--api-key", default=None, help="require this bearer token")
    parser.add_argument("--model", default=None, help="model spec for load_lm (default: bundled SmolLM2)")
    parser.add_argument("--max-model-len", type=int, default=None)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each POST waits before its answer")
    parser.add_argument("--scoring", choices=SCORING, default="vllm", help="how completions give prompt log-probs")
    parser.add_argument("--ignore-model", action="store_true", help="answer any model name, as llama.cpp does")
    args = parser.parse_args(argv)
    server = start_server(Engine(args.model, max_model_len=args.max_model_len), api_key=args.api_key,
                          host=args.host, port=args.port, delay=args.delay, scoring=args.scoring,
                          ignore_model=args.ignore_model)
    print(f"serving {server.engine.name} at {server.url}", flush=True)
    try:
        server._thread.join()
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main()
