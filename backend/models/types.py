"""Types shared by the model backend: model identity, token scores (whole and partial), the scorer protocol."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import numpy as np

from backend.errors import ParameterError
from backend.progress import Progress

__all__ = [
    "ModelInfo",
    "TokenScores",
    "Scorer",
    "PartialTokenScores",
    "checked_texts",
]


@dataclass(frozen=True)
class ModelInfo:
    """What the sidebar shows about a loaded model, and what cache keys are made of.

    Attributes:
        name: A short display name (e.g. ``SmolLM2-135M-Instruct``).
        source: Where it came from: a file path, a directory, a hub id or a server URL.
        kind: ``lm``, ``remote-lm`` or ``embedder``.
        parameters: Parameter count (0 when unknown, e.g. a remote model).
        device: ``cuda:0``, ``mps``, ``cpu`` or ``remote``.
        dtype: ``float32``, ``bfloat16``, ``float16`` or ``remote``.
        fingerprint: Identifies the weights exactly (hash of the weight file(s) or of the
            server URL + model name); part of every cache key.
        context_length: The model's maximum context in tokens (None when unknown).
    """

    name: str
    source: str
    kind: str
    parameters: int
    device: str
    dtype: str
    fingerprint: str
    context_length: int | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable form."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class TokenScores:
    """Per-token negative log-likelihoods of a text under a causal LM.

    Attributes:
        starts: Character offset of each token's first character (int64, ascending).
        ends: Character offset just past each token's last character (int64).
        nll: NLL of each token given everything before it (float64, natural log);
            ``nan`` for the first token, which has no context.
        window: The context window (tokens) the scores were computed with.
    """

    starts: np.ndarray
    ends: np.ndarray
    nll: np.ndarray
    window: int

    def __len__(self) -> int:
        return int(self.nll.shape[0])

    def span_stats(self, spans: Sequence[tuple[int, int]]) -> list[tuple[float, int]]:
        """Mean NLL and count of the scored tokens whose first character lies in each span.

        A span with no scored token gets ``(nan, 0)``.
        """
        out = []
        scored = ~np.isnan(self.nll)
        for a, b in spans:
            lo = int(np.searchsorted(self.starts, a, side="left"))
            hi = int(np.searchsorted(self.starts, b, side="left"))
            mask = scored[lo:hi]
            n = int(mask.sum())
            out.append((float(self.nll[lo:hi][mask].mean()) if n else float("nan"), n))
        return out


class Scorer(Protocol):
    """A causal LM that scores text (local or remote)."""

    info: ModelInfo

    def token_nll(
        self, text: str, *, window: int | None = None, progress: Progress | None = None
    ) -> TokenScores:
        """Score every token of ``text`` once, with as much preceding context as fits in ``window``."""

    def conditional_nll(
        self, pairs: Sequence[tuple[str, str]], *, progress: Progress | None = None
    ) -> list[float]:
        """Mean NLL of each continuation q given its context d (d and q tokenized separately)."""

    def next_token_probs(self, prompt: str | list[dict[str, str]], candidates: Sequence[str]) -> dict[str, float]:
        """Probability of each candidate string's first token as the next token after ``prompt``.

        A list of chat messages is rendered with the model's chat template (generation prompt added).
        """


@dataclass(frozen=True)
class PartialTokenScores:
    """The scores of a scoring pass still running: tokens ``0 … scored-1`` hold their final NLL.

    Attributes:
        scores: Every token's offsets; ``nll`` is final below ``scored`` and ``nan`` from it on.
        scored: How many leading tokens are scored (the windows done so far, in order).
        text: The text being scored ("" when not said), so a viewer draws it on its own document only.
    """

    scores: TokenScores
    scored: int
    text: str = ""

    @property
    def complete(self) -> bool:
        """Whether every token is scored."""
        return self.scored >= len(self.scores)


def checked_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, after checking it is a sequence of strings (what every embedder's ``embed`` takes).

    Raises:
        ParameterError: ``texts`` is a single string, or holds something that is not a string.
    """
    if isinstance(texts, str):
        raise ParameterError("embed() takes a sequence of texts, not a single string")
    items = list(texts)
    bad = next((i for i, t in enumerate(items) if not isinstance(t, str)), None)
    if bad is not None:
        raise ParameterError(f"texts[{bad}] is a {type(items[bad]).__name__}, not a string")
    return items
