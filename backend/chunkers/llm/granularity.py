"""MoC's granularity router, without the fine-tuned small model: pluggable, with two documented baselines.

The paper's router (section 3.2.2) is a small LM fine-tuned to read ~1,024 characters of
text and name the average chunk length a good chunking of it would have, as one of four
classes: (0,120], (120,150], (150,180] or (180,∞) tokens (:data:`GRANULARITIES`). We have
no such model, so a router here is anything with ``route(text) -> class``
(:class:`GranularityRouter`), registered by name in :data:`ROUTERS`
(:func:`register_router`); the ``moc`` chunker's ``router`` parameter picks one, or names a
class directly (``0-120`` … ``180+``). Shipped:

- ``paragraph`` (the default): the class of the median paragraph length in tokens. A
  chunking that respects the text's own structure tends to cut near paragraph ends, so
  paragraph length is the cheapest estimate of its chunk length; texts of short paragraphs
  (dialogue, lists, news) get fine chunks, long expository paragraphs coarse ones. No
  training, no model, deterministic.
- ``trained``: a nearest-centroid classifier over the text features of
  :func:`text_features` (mean sentence and paragraph length in tokens, punctuation,
  line-break and heading-line density), trained from chunkings the user kept. Training
  (:func:`train_router`) follows the paper's data preparation: each kept chunking is cut,
  at chunk boundaries, into samples of about 1,024 characters; a sample's label is the
  class of its chunks' mean token count; features are standardized with the training
  mean and standard deviation and each class keeps its mean feature vector. Prediction
  standardizes the features and takes the nearest class centroid (Euclidean; a tie goes
  to the finer class). The model is a small JSON file (:meth:`CentroidRouter.save`;
  ``data_dir()/moc_router.json`` for ``trained``).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Protocol, Sequence

import numpy as np

from backend.config import data_dir
from backend.errors import ModelError, ParameterError
from backend.text.segment import paragraph_spans, sentence_spans
from backend.tokenizers import Tokenizer

__all__ = [
    "GRANULARITIES",
    "GRANULARITY_NAMES",
    "FEATURES",
    "GranularityRouter",
    "ParagraphRouter",
    "FixedRouter",
    "CentroidRouter",
    "ROUTERS",
    "register_router",
    "make_router",
    "granularity_class",
    "text_features",
    "router_samples",
    "train_router",
    "trained_router_path",
]

# The four granularity classes of section 3.2.2: (low, high] tokens per chunk (high None: unbounded).
GRANULARITIES: tuple[tuple[int, int | None], ...] = ((0, 120), (120, 150), (150, 180), (180, None))
GRANULARITY_NAMES: tuple[str, ...] = ("0-120", "120-150", "150-180", "180+")
FEATURES: tuple[str, ...] = (
    "sentence_tokens",
    "paragraph_tokens",
    "punctuation_per_100_chars",
    "line_breaks_per_100_chars",
    "heading_line_share",
)
SAMPLE_CHARS = 1024
_PUNCT_RE = re.compile(r"[.,;:!?。，；：！？、()\[\]\"'“”‘’-]")
_HEADING_RE = re.compile(r"^\s*(#{1,6}\s|[A-Z0-9][A-Z0-9 .:-]{2,60}$|\d+(\.\d+)*\s+\S)")


class GranularityRouter(Protocol):
    """Picks one of :data:`GRANULARITIES` (its index) for a text, before chunking."""

    name: str

    def route(self, text: str) -> int:
        """The index in :data:`GRANULARITIES` for ``text``."""
        ...


def granularity_class(mean_tokens: float) -> int:
    """The class whose interval (low, high] holds ``mean_tokens`` (0 for 0 or less)."""
    for k, (_low, high) in enumerate(GRANULARITIES):
        if high is None or mean_tokens <= high:
            return k
    return len(GRANULARITIES) - 1


def text_features(text: str, tokenizer: Tokenizer) -> np.ndarray:
    """The :data:`FEATURES` of ``text`` as a float64 vector (zeros for empty text)."""
    if not text.strip():
        return np.zeros(len(FEATURES))
    sentences = [text[s.start : s.end] for s in sentence_spans(text)]
    paragraphs = [text[p.start : p.end] for p in paragraph_spans(text)]
    lines = [ln for ln in text.splitlines() if ln.strip()]
    per100 = 100.0 / max(len(text), 1)
    return np.array(
        [
            float(np.mean(tokenizer.count_many(sentences))) if sentences else 0.0,
            float(np.mean(tokenizer.count_many(paragraphs))) if paragraphs else 0.0,
            len(_PUNCT_RE.findall(text)) * per100,
            text.count("\n") * per100,
            sum(bool(_HEADING_RE.match(ln)) and len(ln) < 80 for ln in lines) / max(len(lines), 1),
        ],
        dtype=np.float64,
    )


@dataclass(frozen=True)
class ParagraphRouter:
    """The class of the median paragraph length in tokens (see the module docstring)."""

    tokenizer: Tokenizer
    name: str = "paragraph"

    def route(self, text: str) -> int:
        paras = [text[p.start : p.end] for p in paragraph_spans(text)]
        if not paras:
            return 0
        return granularity_class(statistics.median(self.tokenizer.count_many(paras)))


@dataclass(frozen=True)
class FixedRouter:
    """Always the same class (the ``router`` parameter naming a class directly)."""

    label: int
    name: str = "fixed"

    def route(self, text: str) -> int:
        return self.label


@dataclass(frozen=True)
class CentroidRouter:
    """Nearest class centroid in standardized feature space (see the module docstring).

    Attributes:
        mean: Training mean of each feature.
        std: Training standard deviation of each feature (zeros replaced by 1).
        centroids: Class index -> mean standardized feature vector, for classes seen in training.
        tokenizer: Counts tokens for :func:`text_features`.
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]
    centroids: tuple[tuple[int, tuple[float, ...]], ...]
    tokenizer: Tokenizer
    name: str = "trained"

    def route(self, text: str) -> int:
        z = (text_features(text, self.tokenizer) - np.array(self.mean)) / np.array(self.std)
        best, best_d = 0, math.inf
        for label, centre in sorted(self.centroids):
            d = float(np.sum((z - np.array(centre)) ** 2))
            if d < best_d - 1e-12:
                best, best_d = label, d
        return best

    def to_json(self) -> dict:
        """The JSON form :meth:`load` reads."""
        return {
            "version": 1,
            "features": list(FEATURES),
            "mean": list(self.mean),
            "std": list(self.std),
            "centroids": {str(k): list(v) for k, v in self.centroids},
        }

    def save(self, path: Path) -> None:
        """Write the router as JSON."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: Path, tokenizer: Tokenizer) -> CentroidRouter:
        """Read a router :meth:`save` wrote.

        Raises:
            ModelError: missing, unreadable or for other features.
        """
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("features") != list(FEATURES):
                raise ValueError("it was trained on other features")
            return cls(
                mean=tuple(float(x) for x in data["mean"]),
                std=tuple(float(x) for x in data["std"]),
                centroids=tuple((int(k), tuple(float(x) for x in v)) for k, v in data["centroids"].items()),
                tokenizer=tokenizer,
            )
        except FileNotFoundError as e:
            raise ModelError(f"no trained MoC router at {path}: train one from kept chunkings first") from e
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise ModelError(f"cannot read the MoC router at {path}: {e}") from e


def router_samples(
    text: str, chunks: Sequence[tuple[int, int, int]], sample_chars: int = SAMPLE_CHARS
) -> list[tuple[str, int]]:
    """Training samples from one kept chunking: ``(sample text, class)``.

    Consecutive chunks ``(start, end, tokens)`` are grouped until a group spans at least
    ``sample_chars`` characters (a longer chunk is a sample alone); the sample is the text
    from the group's first start to its last end, its class that of the group's mean tokens.
    """
    out: list[tuple[str, int]] = []
    group: list[tuple[int, int, int]] = []
    for chunk in chunks:
        group.append(chunk)
        if group[-1][1] - group[0][0] >= sample_chars:
            out.append((text[group[0][0] : group[-1][1]], granularity_class(float(np.mean([c[2] for c in group])))))
            group = []
    if group:
        out.append((text[group[0][0] : group[-1][1]], granularity_class(float(np.mean([c[2] for c in group])))))
    return out


def train_router(samples: Iterable[tuple[str, int]], tokenizer: Tokenizer) -> CentroidRouter:
    """A :class:`CentroidRouter` from ``(text, class)`` samples (e.g. :func:`router_samples`).

    Raises:
        ParameterError: no samples.
    """
    texts, labels = [], []
    for text, label in samples:
        texts.append(text)
        labels.append(int(label))
    if not texts:
        raise ParameterError("training the MoC router needs at least one sample")
    x = np.stack([text_features(t, tokenizer) for t in texts])
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std[std == 0] = 1.0
    z = (x - mean) / std
    y = np.array(labels)
    centroids = tuple(
        (int(k), tuple(float(v) for v in z[y == k].mean(axis=0))) for k in sorted(set(labels))
    )
    return CentroidRouter(tuple(map(float, mean)), tuple(map(float, std)), centroids, tokenizer)


def trained_router_path() -> Path:
    """Where the ``trained`` router is kept: ``data_dir()/moc_router.json``."""
    return data_dir() / "moc_router.json"


# name -> factory(tokenizer) -> router. Registered code, not per-user data.
ROUTERS: dict[str, Callable[[Tokenizer], GranularityRouter]] = {
    "paragraph": lambda tok: ParagraphRouter(tok),
    "trained": lambda tok: CentroidRouter.load(trained_router_path(), tok),
}


def register_router(name: str, factory: Callable[[Tokenizer], GranularityRouter]) -> None:
    """Make ``factory`` available as ``router=name`` of the ``moc`` chunker.

    Raises:
        ValueError: the name is taken (or names a class).
    """
    if name in ROUTERS or name in GRANULARITY_NAMES:
        raise ValueError(f"MoC router {name!r} registered twice")
    ROUTERS[name] = factory


def make_router(name: str, tokenizer: Tokenizer) -> GranularityRouter:
    """The router ``name``: a registered one, or a class name (``0-120`` … ``180+``) for a fixed class.

    Raises:
        ParameterError: an unknown name.
        ModelError: ``trained`` with no trained router saved.
    """
    if name in GRANULARITY_NAMES:
        return FixedRouter(GRANULARITY_NAMES.index(name))
    if name not in ROUTERS:
        known = ", ".join([*ROUTERS, *GRANULARITY_NAMES])
        raise ParameterError(f"router must be one of {known}, got {name!r}")
    return ROUTERS[name](tokenizer)
