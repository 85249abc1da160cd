"""FreeChunker's building blocks: units, cross-granularity windows, window vectors, merged runs, encoders.

FreeChunker (Zhang, Jiang and Wu, arXiv 2510.20356) embeds a document's units once and retrieves
over the units *and* over windows of ``g`` consecutive units for several granularities ``g``, whose
vectors come from the unit vectors instead of from re-embedding text:

- **units** (:func:`backend.chunkers.multi.token_units`): the paper splits sentences; the authors' released code
  (``mazehart/FreeChunker``, ``src/sentenizer.py``) actually cuts fixed 256-token pieces with
  the Qwen3-8B tokenizer. Here a unit is an exact span cut at token starts of any
  :class:`~backend.tokenizers.Tokenizer` (sentence units come from the sentence segmenter).
- **windows** (:func:`windows`): the chunk patterns of eq. 1, ``P[s, j] = 0`` for
  ``s <= j < s + g``, with the authors' layout (``src/utils.py``, ``generate_shifted_matrix``):
  for each ``g`` windows start every ``g // 2`` units, plus a tail window ending at the last unit.
- **window vectors**: :func:`mean_vectors` (our default, ``encoder=mean``: the renormalised mean
  of the unit vectors, no model), the caller embedding each window's own text (``encoder=exact``,
  the target the trained encoder approximates), or a trained cross-granularity encoder
  (``encoder=model:PATH``, :func:`load_encoder`).
- **runs** (:func:`assemble_runs`): the retrieved entries merge into maximal runs of units, so no
  character is returned twice (the authors' ``src/aggregator.py`` de-duplicates sentences too).

The encoder, eq. 2-5: ``m`` copies of a learnt chunk query ``H`` attend to the unit vectors ``E``
through the mask ``P``; each layer is ``V = LayerNorm(H + Attn(H, E))``,
``H' = LayerNorm(V + FFN(V))``. What is known of the authors' release, read from
``mazehart/FreeChunker`` (``src/freechunker.py``, ``src/configuration.py``, ``src/utils.py``,
``src/encoder.py``, ``train and preprocess/3_train_jina.py``): the encoder is a modified
XLM-RoBERTa (``FreeChunkerModel``) initialised from BAAI/bge-m3 (hidden size 1024, 24 layers,
16 heads) and saved with ``save_pretrained`` as ``config.json`` + ``model.safetensors``
(Hugging Face: XiaSheng/FreeChunk-jina, -nomic, -bge-m3). The chunk query is the embedding
layer's output for token 0 at position 0 (``LayerNorm(word[0] + position[0] + token_type[0])``),
the same ``E`` feeds keys and values of every layer (multi-head, scaled by the head size), unit
vectors narrower than the hidden size are zero-padded and outputs cut back to their width, and a
sentence keeps its own (normalised) vector: only multi-unit windows go through the encoder.
:class:`CrossGranularityEncoder` reads that layout (the weight names are listed on the class);
its outputs have not been compared with the authors' code on their released weights (the hub
cannot be reached from where this was written), so treat equality with their outputs as
expected, not verified. The authors' config does not record the width of the unit vectors an
encoder was trained on: only our own ``input_size`` key lets a width mismatch be refused.

Pure numpy except the encoder, which imports torch and safetensors when it is loaded or built.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from huggingface_hub import snapshot_download
from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

from backend.config import hub_offline_variable
from backend.errors import ModelError, ParameterError
from backend.models.devices import select_device
from backend.models.embedder import weights_fingerprint
from backend.models.hub import hub_reachable

if TYPE_CHECKING:
    import torch

__all__ = [
    "Range",
    "Window",
    "Run",
    "EncoderConfig",
    "CrossGranularityEncoder",
    "DEFAULT_GRANULARITIES",
    "windows",
    "chunk_pattern_mask",
    "mean_vectors",
    "assemble_runs",
    "load_encoder",
]

Range = tuple[int, int]

DEFAULT_GRANULARITIES: tuple[int, ...] = (2, 4)


# --- units -----------------------------------------------------------------------------------


# --- windows ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """Consecutive units ``[first, last)``: one chunk pattern of eq. 1.

    Attributes:
        size: The granularity ``g`` (1 = a single unit; an all-units window made for a ``g``
            larger than the document holds ``last - first`` units and says so).
        first: Index of the first unit.
        last: One past the index of the last unit.
    """

    size: int
    first: int
    last: int


def _granularity_list(sizes: Sequence[int]) -> list[int]:
    """Ascending, deduplicated granularities; ParameterError for one below 2."""
    out = set()
    for g in sizes:
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 2:
            raise ParameterError(f"granularity {g!r} must be a whole number of at least 2")
        out.add(int(g))
    return sorted(out)


def windows(n_units: int, sizes: Sequence[int] = DEFAULT_GRANULARITIES, include_units: bool = True) -> list[Window]:
    """The chunk patterns of a document of ``n_units`` units, as the authors' code lays them out.

    Units (size 1) come first if ``include_units``; then, for each ``g`` in ``sizes``
    (ascending, deduplicated), windows of ``g`` units starting at 0, ``g // 2``,
    ``2 * (g // 2)``… while they fit, plus a tail window ``[n_units - g, n_units)`` when the
    last regular one does not end at ``n_units``. A ``g`` larger than the document gives one
    window of all its units, added once (and not at all when a window or unit already spans
    the whole document): no span appears twice. (The authors' ``generate_shifted_matrix``
    skips such a ``g`` and adds the all-units window only when no other window exists; one
    version of it steps by ``g`` instead of ``g // 2``.)

    Args:
        n_units: Units in the document.
        sizes: Granularities ``g``, each at least 2.
        include_units: Start with the single units.

    Returns:
        The windows, in that order.

    Raises:
        ParameterError: a size below 2, or a negative ``n_units``.
    """
    if n_units < 0:
        raise ParameterError(f"n_units ({n_units}) must not be negative")
    gs = _granularity_list(sizes)
    out = [Window(1, i, i + 1) for i in range(n_units)] if include_units else []
    if n_units == 0:
        return out
    spans_all = include_units and n_units == 1
    for g in gs:
        if g > n_units:
            if not spans_all:
                out.append(Window(n_units, 0, n_units))
                spans_all = True
            continue
        step = g // 2
        last_start = (n_units - g) // step * step
        out.extend(Window(g, s, s + g) for s in range(0, last_start + 1, step))
        if last_start + g != n_units:
            out.append(Window(g, n_units - g, n_units))
        spans_all = spans_all or g == n_units
    return out


def _bounds(wins: Sequence[Window], n_units: int) -> tuple[np.ndarray, np.ndarray]:
    """The windows' first and last unit indices as arrays; ParameterError for one outside the units."""
    first = np.fromiter((w.first for w in wins), dtype=np.int64, count=len(wins))
    last = np.fromiter((w.last for w in wins), dtype=np.int64, count=len(wins))
    bad = np.flatnonzero((first < 0) | (last <= first) | (last > n_units))
    if bad.size:
        raise ParameterError(f"window {wins[int(bad[0])]} does not lie within the {n_units} units")
    return first, last


def chunk_pattern_mask(wins: Sequence[Window], stop: int, start: int = 0) -> np.ndarray:
    """The chunk pattern mask ``P`` of eq. 1 over units ``[start, stop)``.

    Row ``i`` is 0 for the units of ``wins[i]`` and ``-inf`` elsewhere (float32,
    ``(len(wins), stop - start)``). The encoder adds it to the attention scores, so a window
    attends to its own units only.
    """
    first = np.fromiter((w.first for w in wins), dtype=np.int64, count=len(wins))
    last = np.fromiter((w.last for w in wins), dtype=np.int64, count=len(wins))
    j = np.arange(start, stop, dtype=np.int64)
    inside = (j[None, :] >= first[:, None]) & (j[None, :] < last[:, None])
    return np.where(inside, np.float32(0.0), np.float32(-np.inf)).astype(np.float32)


# --- window vectors without a model ----------------------------------------------------------

_MEAN_BLOCK = 1024  # windows per block: keeps the float64 scratch (block x d) in cache


def mean_vectors(unit_vectors: np.ndarray, wins: Sequence[Window]) -> np.ndarray:
    """Each window's mean of its unit vectors, L2-renormalised (``encoder=mean``).

    Uses one cumulative sum over the units (float64, so long documents lose no precision):
    a window's sum is a difference of two rows, whatever its size.

    Args:
        unit_vectors: ``(n_units, d)`` unit vectors.
        wins: The windows (units included, if wanted).

    Returns:
        float32 ``(len(wins), d)``; a window whose mean is zero stays zero.

    Raises:
        ParameterError: ``unit_vectors`` is not 2-D, or a window lies outside the units.
    """
    vectors = np.asarray(unit_vectors)
    if vectors.ndim != 2:
        raise ParameterError(f"unit_vectors must be 2-D (units x dims), got shape {vectors.shape}")
    n, d = vectors.shape
    first, last = _bounds(wins, n)
    csum = np.empty((n + 1, d), dtype=np.float64)
    csum[0] = 0.0
    csum[1:] = vectors
    np.cumsum(csum[1:], axis=0, out=csum[1:])  # in place: a converting cumsum is slower
    out = np.empty((len(wins), d), dtype=np.float32)
    for lo in range(0, len(wins), _MEAN_BLOCK):
        sums = np.take(csum, last[lo : lo + _MEAN_BLOCK], axis=0)
        sums -= np.take(csum, first[lo : lo + _MEAN_BLOCK], axis=0)
        # The mean's direction is the sum's: normalising the sum gives the same vector.
        norms = np.sqrt(np.einsum("ij,ij->i", sums, sums))[:, None]
        np.divide(sums, norms, out=sums, where=norms > 0)
        out[lo : lo + _MEAN_BLOCK] = sums
    return out


# --- runs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """A maximal run of retrieved units, as returned to the reader.

    Attributes:
        first: First unit of the run.
        last: One past its last unit.
        start: Character offset where the run starts (``unit_ranges[first][0]``).
        end: Character offset where it ends (``unit_ranges[last - 1][1]``).
        score: The best similarity (1 - cosine distance) among the entries that formed it.
        rank: 1-based, by score descending.
        entries: Indices into the hits given of the entries merged into it, ascending.
    """

    first: int
    last: int
    start: int
    end: int
    score: float
    rank: int
    entries: tuple[int, ...]


def assemble_runs(hits: Sequence[tuple[Window, float]], unit_ranges: Sequence[Range]) -> list[Run]:
    """Merge retrieved entries into maximal runs of units, ranked by their best entry.

    Entries whose windows overlap (share a unit) or are adjacent (one ends where the next
    begins) merge, transitively. Runs are ranked by their best similarity; ties go to the
    run that comes first in the document. Runs share no unit, hence no character.

    Args:
        hits: The retrieved entries, ``(window, similarity)``, in any order.
        unit_ranges: Character span of each unit, ascending.

    Returns:
        The runs, best first.

    Raises:
        ParameterError: a window lies outside the units.
    """
    if not hits:
        return []
    wins = [w for w, _ in hits]
    first, last = _bounds(wins, len(unit_ranges))
    order = sorted(range(len(hits)), key=lambda i: (int(first[i]), int(last[i]), i))
    groups: list[tuple[int, int, list[int]]] = []
    for i in order:
        f, la = int(first[i]), int(last[i])
        if groups and f <= groups[-1][1]:
            g_first, g_last, members = groups[-1]
            members.append(i)
            groups[-1] = (g_first, max(g_last, la), members)
        else:
            groups.append((f, la, [i]))
    scored = [(max(float(hits[i][1]) for i in members), f, la, members) for f, la, members in groups]
    ranked = sorted(range(len(scored)), key=lambda k: (-scored[k][0], scored[k][1]))
    return [
        Run(
            first=scored[k][1],
            last=scored[k][2],
            start=int(unit_ranges[scored[k][1]][0]),
            end=int(unit_ranges[scored[k][2] - 1][1]),
            score=scored[k][0],
            rank=rank,
            entries=tuple(sorted(scored[k][3])),
        )
        for rank, k in enumerate(ranked, start=1)
    ]


# --- the trained cross-granularity encoder ---------------------------------------------------

_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish")
_PREFIX = "roberta."  # the Hugging Face base-model prefix a checkpoint may carry
_WEIGHTS_FILE = "model.safetensors"
_CONFIG_FILE = "config.json"
_BLOCK = 256  # windows encoded together: bounds the attention scores to heads x block x span


@dataclass(frozen=True)
class EncoderConfig:
    """The encoder's shape, as read from (and written to) ``config.json``.

    The keys are the authors' (Hugging Face XLM-RoBERTa names); ``input_size`` is ours: the
    width of the unit vectors the encoder was trained on. Absent (as in the authors'
    release), any width up to ``hidden_size`` is accepted and zero-padded, as their code does.
    """

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    hidden_act: str = "gelu"
    layer_norm_eps: float = 1e-5
    input_size: int | None = None

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> EncoderConfig:
        """The config in ``raw`` (a parsed config.json); ModelError naming ``where`` if it is unusable."""
        values: dict[str, Any] = {}
        for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"):
            value = raw.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ModelError(f"{where}: {key} must be a positive integer, got {value!r}")
            values[key] = value
        act = raw.get("hidden_act", "gelu")
        if act not in _ACTIVATIONS:
            raise ModelError(f"{where}: hidden_act {act!r} is not one of {', '.join(_ACTIVATIONS)}")
        eps = raw.get("layer_norm_eps", 1e-5)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
            raise ModelError(f"{where}: layer_norm_eps must be a positive number, got {eps!r}")
        position = raw.get("position_embedding_type", "absolute")
        if position != "absolute":
            # Relative position types add distance terms to the scores, which eq. 3 does not have.
            raise ModelError(f"{where}: position_embedding_type {position!r} is not supported (only 'absolute')")
        input_size = raw.get("input_size")
        if input_size is not None and (isinstance(input_size, bool) or not isinstance(input_size, int) or input_size < 1):
            raise ModelError(f"{where}: input_size must be a positive integer, got {input_size!r}")
        config = cls(**values, hidden_act=act, layer_norm_eps=float(eps), input_size=input_size)
        if config.hidden_size % config.num_attention_heads:
            raise ModelError(
                f"{where}: hidden_size ({config.hidden_size}) is not a multiple of "
                f"num_attention_heads ({config.num_attention_heads})"
            )
        if input_size is not None and input_size > config.hidden_size:
            raise ModelError(f"{where}: input_size ({input_size}) exceeds hidden_size ({config.hidden_size})")
        return config

    def weight_shapes(self) -> dict[str, tuple[int, ...]]:
        """The weights the encoder needs, by name, with their shapes (embedding tables: 1 row at least)."""
        h, i = self.hidden_size, self.intermediate_size
        shapes: dict[str, tuple[int, ...]] = {"embeddings.LayerNorm.weight": (h,), "embeddings.LayerNorm.bias": (h,)}
        for layer in range(self.num_hidden_layers):
            p = f"encoder.layer.{layer}."
            for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
                shapes[p + name + ".weight"] = (h, h)
                shapes[p + name + ".bias"] = (h,)
            shapes[p + "intermediate.dense.weight"] = (i, h)
            shapes[p + "intermediate.dense.bias"] = (i,)
            shapes[p + "output.dense.weight"] = (h, i)
            shapes[p + "output.dense.bias"] = (h,)
            for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
                shapes[p + norm + ".weight"] = (h,)
                shapes[p + norm + ".bias"] = (h,)
        return shapes


_TABLES = (  # embedding tables: row 0 of each makes the chunk query
    "embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight",
)


class CrossGranularityEncoder:
    """FreeChunker's cross-granularity encoder (eq. 2-5), inference only.

    Folder layout (the authors' ``save_pretrained`` output; our own saves write the same):
    ``config.json`` with ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``,
    ``intermediate_size``, ``hidden_act``, ``layer_norm_eps`` (and our optional
    ``input_size``), and ``model.safetensors`` with, optionally prefixed ``roberta.``:

    - ``embeddings.{word,position,token_type}_embeddings.weight`` (row 0 of each is used) and
      ``embeddings.LayerNorm.{weight,bias}``: the chunk query
      ``h = LayerNorm(word[0] + position[0] + token_type[0])``;
    - per layer ``encoder.layer.{i}.``: ``attention.self.{query,key,value}``,
      ``attention.output.dense``, ``attention.output.LayerNorm``, ``intermediate.dense``,
      ``output.dense``, ``output.LayerNorm`` (``.weight`` and ``.bias`` each).

    Other weights (the unused pooler) are ignored. Windows are encoded in blocks of nearby
    windows, each against the span of units the block touches: the mask of eq. 1 restricted to
    those columns, which gives the same softmax as the full ``m x n`` mask (every other column
    is ``-inf``) without an ``m x n`` score matrix.
    """

    def __init__(
        self, config: EncoderConfig, weights: dict[str, torch.Tensor], source: str = "", device: str = "cpu",
        fingerprint: str = "",
    ) -> None:
        """Wrap checked ``weights`` (float32, on ``device``); use :func:`load_encoder` or :meth:`random`.

        ``fingerprint`` identifies the weights (the sha256 of the folder's files when loaded):
        index collections of its vectors are named by it.
        """
        self.config = config
        self.fingerprint = fingerprint
        self.source = source or "FreeChunker encoder"
        self.device = device
        self._w = weights
        self._query = None

    @classmethod
    def random(cls, config: EncoderConfig, seed: int = 0, device: str = "cpu") -> CrossGranularityEncoder:
        """An untrained encoder with small random weights (for tests and as a training start)."""
        import torch

        gen = torch.Generator().manual_seed(seed)
        weights: dict[str, torch.Tensor] = {}
        for name, shape in config.weight_shapes().items():
            if "LayerNorm" in name:
                weights[name] = torch.ones(shape) if name.endswith("weight") else torch.zeros(shape)
            else:
                weights[name] = torch.randn(shape, generator=gen) * 0.2
        for name in _TABLES:
            weights[name] = torch.randn((2, config.hidden_size), generator=gen) * 0.2
        return cls(config, {k: v.to(device) for k, v in weights.items()}, source="random encoder", device=device)

    def save(self, folder: str | Path) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``folder`` (created if missing)."""
        from safetensors.torch import save_file

        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        raw = {k: v for k, v in asdict(self.config).items() if v is not None}
        (path / _CONFIG_FILE).write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
        save_file({k: v.detach().contiguous().cpu() for k, v in self._w.items()}, str(path / _WEIGHTS_FILE))
        return path

    def _query_vector(self) -> torch.Tensor:
        """The learnt chunk query (the embedding layer's output for token 0 at position 0)."""
        import torch.nn.functional as F

        if self._query is None:
            w = self._w
            row = sum(w[name][0] for name in _TABLES)
            self._query = F.layer_norm(
                row, (self.config.hidden_size,), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"],
                self.config.layer_norm_eps,
            )
        return self._query

    def _activation(self, x: torch.Tensor) -> torch.Tensor:
        """The feed-forward activation named by ``hidden_act``."""
        import torch.nn.functional as F

        act = self.config.hidden_act
        if act == "gelu":
            return F.gelu(x)
        if act in ("gelu_new", "gelu_pytorch_tanh"):
            return F.gelu(x, approximate="tanh")
        if act == "relu":
            return F.relu(x)
        return F.silu(x)

    def encode(self, unit_vectors: np.ndarray, wins: Sequence[Window]) -> np.ndarray:
        """Vectors of ``wins`` from the unit vectors (L2-normalised float32, ``(len(wins), d)``).

        A single-unit window keeps its unit's own vector, normalised (the authors' code does
        the same: only multi-unit windows go through the encoder). Unit vectors are used as
        given: pass the embedder's vectors the encoder was trained on.

        Raises:
            ModelError: the unit vectors' width does not fit the encoder.
            ParameterError: ``unit_vectors`` is not 2-D, or a window lies outside the units.
        """
        import torch
        import torch.nn.functional as F

        vectors = np.asarray(unit_vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise ParameterError(f"unit_vectors must be 2-D (units x dims), got shape {vectors.shape}")
        n, d = vectors.shape
        cfg = self.config
        if cfg.input_size is not None and d != cfg.input_size:
            raise ModelError(f"{self.source} was trained on {cfg.input_size}-dim unit vectors; got {d}-dim ones")
        if d > cfg.hidden_size:
            raise ModelError(f"{self.source} takes unit vectors of at most {cfg.hidden_size} dims; got {d}-dim ones")
        first, last = _bounds(wins, n)
        out = np.zeros((len(wins), d), dtype=np.float32)
        single = np.flatnonzero(last - first == 1)
        if single.size:
            units = vectors[first[single]]
            norms = np.linalg.norm(units, axis=1, keepdims=True)
            out[single] = np.divide(units, norms, out=np.zeros_like(units), where=norms > 0)
        multi = np.flatnonzero(last - first > 1)
        if multi.size == 0:
            return out
        # Nearby windows together: a block then touches a short span of units.
        multi = multi[np.lexsort((last[multi], first[multi]))]
        E = torch.zeros((n, cfg.hidden_size), dtype=torch.float32, device=self.device)
        E[:, :d] = torch.from_numpy(vectors).to(self.device)
        with torch.inference_mode():
            for lo in range(0, multi.size, _BLOCK):
                idx = multi[lo : lo + _BLOCK]
                col_lo, col_hi = int(first[idx].min()), int(last[idx].max())
                block_wins = [wins[int(i)] for i in idx]
                mask = torch.from_numpy(chunk_pattern_mask(block_wins, col_hi, col_lo)).to(self.device)
                h = self._forward(E[col_lo:col_hi], mask)[:, :d]
                out[idx] = F.normalize(h, p=2, dim=-1).cpu().numpy()
        return out

    def _forward(self, E: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Eq. 2-5 for ``mask.shape[0]`` chunk queries over the unit vectors ``E``."""
        import torch
        import torch.nn.functional as F

        cfg, w = self.config, self._w
        m, hdim, heads = mask.shape[0], cfg.hidden_size, cfg.num_attention_heads
        hd = hdim // heads
        H = self._query_vector().expand(m, hdim)
        for layer in range(cfg.num_hidden_layers):
            p = f"encoder.layer.{layer}."

            def lin(x: torch.Tensor, name: str) -> torch.Tensor:
                return F.linear(x, w[p + name + ".weight"], w[p + name + ".bias"])

            def norm(x: torch.Tensor, name: str) -> torch.Tensor:
                return F.layer_norm(x, (hdim,), w[p + name + ".weight"], w[p + name + ".bias"], cfg.layer_norm_eps)

            q = lin(H, "attention.self.query").view(m, heads, hd).transpose(0, 1)
            k = lin(E, "attention.self.key").view(-1, heads, hd).transpose(0, 1)
            v = lin(E, "attention.self.value").view(-1, heads, hd).transpose(0, 1)
            scores = torch.matmul(q, k.transpose(1, 2)) / (hd**0.5) + mask
            context = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(0, 1).reshape(m, hdim)
            V = norm(H + lin(context, "attention.output.dense"), "attention.output.LayerNorm")
            ffn = lin(self._activation(lin(V, "intermediate.dense")), "output.dense")
            H = norm(V + ffn, "output.LayerNorm")
        return H


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _hub_folder(repo_id: str) -> Path:
    """The local snapshot of ``repo_id`` (config and weights only): the cache, or the hub where reachable."""
    offline_by = hub_offline_variable()
    online = offline_by is None and hub_reachable()
    try:
        return Path(
            snapshot_download(repo_id, allow_patterns=[_CONFIG_FILE, _WEIGHTS_FILE], local_files_only=not online)
        )
    except LocalEntryNotFoundError as e:
        why = f"{offline_by} is set" if offline_by else "the Hugging Face hub is unreachable"
        raise ModelError(
            f"FreeChunker encoder {repo_id!r} is not a local folder nor in the Hugging Face cache, and {why}"
        ) from e
    except (HfHubHTTPError, OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot fetch FreeChunker encoder {repo_id!r}: {first}") from e


def load_encoder(spec: str, device: str | None = None) -> CrossGranularityEncoder:
    """The encoder named by ``encoder=model:PATH``: a local folder (or a cached hub id).

    The folder holds ``config.json`` and ``model.safetensors`` in the authors' layout (see
    :class:`CrossGranularityEncoder`), e.g. a download of XiaSheng/FreeChunk-jina. Nothing is
    downloaded for a folder; a hub id (``owner/name`` that is no folder here) is read from the
    Hugging Face cache, or fetched where the hub is reachable and not turned off. The
    authors' ``trust_remote_code`` files are never run: only the two files are read.

    Args:
        spec: ``model:PATH``.
        device: ``cpu``, ``cuda``, ``mps``…; None reads ``CHUNKLAB_DEVICE`` (default: the best here).

    Raises:
        ParameterError: ``spec`` does not start with ``model:`` or names no path.
        ModelError: a missing folder or file, a bad config, or weights that do not fit it.
    """
    if not isinstance(spec, str) or not spec.startswith("model:") or not spec[len("model:") :].strip():
        raise ParameterError(f"encoder {spec!r} must read model:PATH (a folder with config.json and model.safetensors)")
    raw_path = spec[len("model:") :].strip()
    folder = Path(raw_path).expanduser()
    if not folder.exists() and _HUB_ID.match(raw_path) and not raw_path.startswith((".", "/", "~")):
        folder = _hub_folder(raw_path)
    if not folder.is_dir():
        raise ModelError(f"FreeChunker encoder folder {str(folder)!r} does not exist")
    config_path, weights_path = folder / _CONFIG_FILE, folder / _WEIGHTS_FILE
    for path in (config_path, weights_path):
        if not path.is_file():
            raise ModelError(f"FreeChunker encoder folder {str(folder)!r} has no {path.name}")
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelError(f"{config_path}: not a readable JSON file ({e})") from e
    if not isinstance(raw, dict):
        raise ModelError(f"{config_path}: expected a JSON object")
    config = EncoderConfig.from_json(raw, str(config_path))

    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        stored = load_file(str(weights_path), device="cpu")
    except (SafetensorError, OSError) as e:
        raise ModelError(f"{weights_path}: not a readable safetensors file ({e})") from e
    tensors = {(k[len(_PREFIX) :] if k.startswith(_PREFIX) else k): v for k, v in stored.items()}
    wanted = config.weight_shapes()
    for name in _TABLES:
        wanted[name] = (-1, config.hidden_size)
    weights = {}
    for name, shape in wanted.items():
        tensor = tensors.get(name)
        if tensor is None:
            raise ModelError(f"{weights_path}: missing weight {name!r} (is this a FreeChunker encoder?)")
        ok = tensor.ndim == len(shape) and all(s in (-1, t) for s, t in zip(shape, tensor.shape))
        if not ok or tensor.numel() == 0:
            want = "x".join("n" if s == -1 else str(s) for s in shape)
            raise ModelError(
                f"{weights_path}: weight {name!r} has shape {tuple(tensor.shape)}, config.json implies {want}"
            )
        weights[name] = tensor.float()
    target = select_device(device)
    weights = {k: v.to(target) for k, v in weights.items()}
    return CrossGranularityEncoder(
        config, weights, source=f"FreeChunker encoder {str(folder)!r}", device=target,
        fingerprint=weights_fingerprint(folder),
    )
