"""MoG's router: an MLP from a query vector to one weight per granularity level, trained on soft labels.

The Mix-of-Granularity paper (section 3.2.2) trains a small MLP to say, from the query
alone, which granularity level will hold its answer. The top-k retrieval in the way is not
differentiable, so the router is trained on *soft labels* instead (eq. 3): for each
training question, the best snippet of every level is scored against the answer, the most
similar level gets 0.8, the runner-up 0.2 and the rest 0 (:func:`soft_labels`; the paper
finds 0.7/0.3 as good, :data:`SOFT_LABELS`), and the router's sigmoid outputs are fitted to
them with per-level binary cross-entropy. How the similarities are measured (span IoU,
recall, or an embedding similarity as the paper's RoBERTa) is the caller's choice, recorded
in :class:`RouterMeta`.

- :func:`train_router`: Linear(dim, hidden) → ReLU → Dropout(0.1) → Linear(hidden, levels),
  ``BCEWithLogitsLoss`` on the logits, Adam (lr 1e-3, as the paper), mini-batches of 64,
  a seeded validation split; deterministic for a seed, from a ``torch.Generator`` of its
  own. torch is imported there only.
- :func:`cross_fit`: k-fold cross-fitting, so that no question in a benchmark is routed by a
  router that was trained on it.
- :class:`Router`: the trained weights as numpy arrays; :meth:`Router.predict` needs no torch.
- :func:`save_router` / :func:`load_router`: a ``.npz`` of the four weight arrays plus a JSON
  header (meta and training report) as a uint8 array, read with ``allow_pickle=False``,
  because a router file is untrusted input. Loading checks the embedder fingerprint, the
  number of levels and the description of the levels (``base``) against the caller's.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from numpy.lib.npyio import NpzFile

from backend.errors import InputError, ParameterError, one_line
from backend.progress import Progress

__all__ = [
    "SOFT_LABELS",
    "LABEL_KINDS",
    "FORMAT_VERSION",
    "ROUTER_SUFFIX",
    "DROPOUT",
    "DEFAULT_EPOCHS",
    "MAX_FILE_BYTES",
    "soft_labels",
    "RouterMeta",
    "TrainReport",
    "Router",
    "train_router",
    "cross_fit",
    "save_router",
    "load_router",
]

SOFT_LABELS = {"0.8/0.2": (0.8, 0.2), "0.7/0.3": (0.7, 0.3)}  # the paper's two settings (section 3.2.2)
LABEL_KINDS = ("iou", "recall", "embedding")  # how a level's best snippet is scored against the answer
FORMAT_VERSION = 1  # of the router file; a newer one is refused on load
ROUTER_SUFFIX = ".router.npz"  # suggested; any name is accepted
DROPOUT = 0.1
DEFAULT_EPOCHS = 200
MAX_FILE_BYTES = 256 * 2**20  # unpacked; a 4096-dim, 1024-wide router is 16 MiB
_FORMAT = "chunk-lab-router"
_HEADER = "header"
_WEIGHTS = ("w1", "b1", "w2", "b2")
_RETRAIN = "retrain it with 'python -m backend router train'"


def soft_labels(similarities: Sequence[float], top: float = 0.8, second: float = 0.2) -> np.ndarray:
    """MoG eq. 3's soft labels: ``top`` for the most similar level, ``second`` for the runner-up, 0 elsewhere.

    The paper's examples: ``[0, .32, .11, .88, .45]`` → ``[0, 0, 0, .8, .2]`` and
    ``[.95, .07, .22, .11, .19]`` → ``[.8, 0, .2, 0, 0]``. On ties the finer (lower index)
    level wins. A runner-up whose similarity is 0 or below gets 0, not ``second``: a level
    that does not retrieve the answer at all is no second choice. When every similarity is
    0 or below the labels are all zero, and :func:`train_router` drops the question.

    Args:
        similarities: One similarity per level, finest first.
        top: The best level's label (0.8 or 0.7 in the paper).
        second: The runner-up's label (0.2 or 0.3).

    Returns:
        A float64 array of the same length.

    Raises:
        ParameterError: No similarities, a NaN or infinite one, or labels outside
            ``0 <= second <= top <= 1``.
    """
    sims = np.asarray(similarities, dtype=np.float64)
    if sims.ndim != 1 or sims.size == 0:
        raise ParameterError(f"soft_labels needs a non-empty list of similarities, got shape {sims.shape}")
    if not np.all(np.isfinite(sims)):
        raise ParameterError(f"similarities must be finite numbers, got {sims.tolist()}")
    if not 0.0 <= second <= top <= 1.0:
        raise ParameterError(f"soft labels need 0 <= second <= top <= 1, got top={top}, second={second}")
    out = np.zeros(sims.size, dtype=np.float64)
    best = int(np.argmax(sims))  # argmax takes the first of equal values: the finer level
    if sims[best] <= 0:
        return out
    out[best] = top
    if sims.size > 1:
        rest = sims.copy()
        rest[best] = -np.inf
        runner = int(np.argmax(rest))
        if rest[runner] > 0:
            out[runner] = second
    return out


@dataclass(frozen=True)
class RouterMeta:
    """What a router was trained for: checked when a router file is loaded.

    Attributes:
        levels: Number of granularity levels (the router's outputs), finest first.
        base: JSON-ready description of what the levels are built from: the retriever's
            name and the parameters that shape the levels (compared for equality on load).
        embedder: Name of the embedder of the query vectors.
        embedder_fingerprint: Fingerprint of the embedder's weights.
        label: How a level's best snippet was scored against the answer: one of
            :data:`LABEL_KINDS` (``""`` when not recorded).
        soft: The soft-label values, a key of :data:`SOFT_LABELS` (``""`` when not recorded).
        dim: Query vector dimension.
        hidden: Width of the hidden layer.
        created: When it was trained (ISO 8601, UTC).
        version: File format version.
    """

    levels: int
    base: dict
    embedder: str
    embedder_fingerprint: str
    label: str
    soft: str
    dim: int
    hidden: int
    created: str
    version: int = FORMAT_VERSION

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class TrainReport:
    """How a router's training went.

    Attributes:
        questions: Questions trained and validated on (rows with a non-zero label).
        dropped: Questions left out because every label was zero (no level retrieves the answer).
        validation: How many of ``questions`` were held out for the validation loss.
        train_loss: Per epoch, the mean over training questions of eq. 3's loss (summed over
            levels), measured after the epoch with dropout off.
        val_loss: The same over the validation questions; empty without a validation split.
        label_histogram: Per level, how many questions have their best (``top``) label there.
        seconds: Wall-clock training time.
        epochs: Number of epochs run.
    """

    questions: int
    dropped: int
    validation: int
    train_loss: tuple[float, ...]
    val_loss: tuple[float, ...]
    label_histogram: tuple[int, ...]
    seconds: float
    epochs: int

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (losses and the histogram as lists)."""
        out = asdict(self)
        for name in ("train_loss", "val_loss", "label_histogram"):
            out[name] = list(out[name])
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrainReport:
        """The report :meth:`to_json` wrote.

        Raises:
            KeyError, TypeError, ValueError: ``data`` is not such a dict.
        """
        return cls(
            questions=int(data["questions"]),
            dropped=int(data["dropped"]),
            validation=int(data["validation"]),
            train_loss=tuple(float(x) for x in data["train_loss"]),
            val_loss=tuple(float(x) for x in data["val_loss"]),
            label_histogram=tuple(int(x) for x in data["label_histogram"]),
            seconds=float(data["seconds"]),
            epochs=int(data["epochs"]),
        )


@dataclass(frozen=True, eq=False)
class Router:
    """An MLP: query vector → one sigmoid weight per level (MoG's router).

    The weights are plain numpy arrays (``w1`` (hidden, dim), ``b1`` (hidden,), ``w2``
    (levels, hidden), ``b2`` (levels,)), so predicting needs no torch. Build one with
    :func:`train_router` or :func:`load_router`.

    Attributes:
        meta: What it was trained for.
        w1, b1, w2, b2: The two linear layers (read-only arrays).
        report: How training went; None when not known.
    """

    meta: RouterMeta
    w1: np.ndarray = field(repr=False)
    b1: np.ndarray = field(repr=False)
    w2: np.ndarray = field(repr=False)
    b2: np.ndarray = field(repr=False)
    report: TrainReport | None = None

    def predict(self, vectors: np.ndarray) -> np.ndarray:
        """The level weights of query vectors.

        Args:
            vectors: One query vector of length ``meta.dim``, or an ``(n, dim)`` array.

        Returns:
            float64 weights between 0 and 1: ``(n, levels)``, or ``(levels,)`` for one vector.

        Raises:
            ParameterError: Wrong dimension, or NaN / infinite values.
        """
        x = np.asarray(vectors, dtype=np.float64)
        single = x.ndim == 1
        if single:
            x = x[None, :]
        if x.ndim != 2 or x.shape[1] != self.meta.dim:
            raise ParameterError(
                f"query vectors of shape {np.shape(vectors)} do not fit this router (dimension {self.meta.dim})"
            )
        if not np.all(np.isfinite(x)):
            raise ParameterError("query vectors hold NaN or infinite values")
        h = np.maximum(x @ self.w1.T.astype(np.float64) + self.b1, 0.0)
        out = _sigmoid(h @ self.w2.T.astype(np.float64) + self.b2)
        return out[0] if single else out


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """The logistic function, without overflow warnings for large ``|z|``."""
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _check_data(vectors: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``vectors`` and ``labels`` as float arrays of matching rows, or ParameterError."""
    x = np.asarray(vectors, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ParameterError(f"router training needs an (n, dim) array of query vectors, got shape {x.shape}")
    if y.ndim != 2 or y.shape[1] == 0:
        raise ParameterError(f"router training needs an (n, levels) array of soft labels, got shape {y.shape}")
    if y.shape[0] != x.shape[0]:
        raise ParameterError(f"router training got {x.shape[0]} query vectors but {y.shape[0]} label rows")
    if not np.all(np.isfinite(x)):
        raise ParameterError("query vectors hold NaN or infinite values")
    if not np.all(np.isfinite(y)) or y.min() < 0 or y.max() > 1:
        raise ParameterError("soft labels must lie between 0 and 1")
    return x, y


def _json_ready(value: Any, what: str) -> Any:
    """``value`` after a JSON round trip (tuples become lists), or ParameterError naming ``what``."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as e:
        raise ParameterError(f"{what} must be JSON-serializable: {e}") from e


def train_router(
    vectors: np.ndarray,
    labels: np.ndarray,
    *,
    base: Mapping[str, Any] | None = None,
    embedder: str = "",
    embedder_fingerprint: str = "",
    label: str = "",
    soft: str = "",
    epochs: int = DEFAULT_EPOCHS,
    lr: float = 1e-3,
    hidden: int = 128,
    batch_size: int = 64,
    val_fraction: float = 0.2,
    seed: int = 0,
    progress: Progress | None = None,
) -> tuple[Router, TrainReport]:
    """Train MoG's router on query vectors and their soft labels.

    Rows whose labels are all zero (no level retrieves the answer) are dropped. With at
    least 5 usable rows and ``val_fraction > 0``, a seeded random ``val_fraction`` of them
    (at least 1, leaving at least 2 to train on) is held out to report a validation loss;
    the router keeps the weights of the last epoch. Mini-batches are shuffled each epoch.
    The same data and seed give the same router: the seed drives the split (a numpy
    Generator) and torch's initialization, shuffling and dropout (a seeded
    ``torch.Generator`` of this call's own: torch's global random state, shared by every
    thread, is neither read nor changed).

    ``levels`` and ``dim`` come from the arrays; ``base``, ``embedder``,
    ``embedder_fingerprint``, ``label`` and ``soft`` are only recorded in :class:`RouterMeta`
    (and checked when a saved router is loaded), so a router that is never saved, as in
    :func:`cross_fit`, can leave them out.

    Args:
        vectors: ``(n, dim)`` query vectors.
        labels: ``(n, levels)`` soft labels (rows of :func:`soft_labels`).
        base: What the levels are built from (retriever name and level-shaping
            parameters), JSON-serializable.
        embedder: The embedder's name.
        embedder_fingerprint: The embedder's weights fingerprint.
        label: How the labels were built, one of :data:`LABEL_KINDS` (or ``""``).
        soft: The soft-label setting, a key of :data:`SOFT_LABELS` (or ``""``).
        epochs: Passes over the training rows.
        lr: Adam's learning rate (the paper's 1e-3).
        hidden: Width of the hidden layer.
        batch_size: Rows per optimizer step.
        val_fraction: Share of usable rows held out for validation, in ``[0, 1)``.
        seed: Seed of the split, the initialization, the shuffling and dropout.
        progress: Called as ``progress(epoch, epochs)`` after each epoch; an exception it
            raises (a cancel) stops training and propagates.

    Returns:
        The router and its training report.

    Raises:
        ParameterError: Bad shapes or values, or fewer than 2 usable rows.
    """
    x, y = _check_data(vectors, labels)
    for name, value in (("epochs", epochs), ("hidden", hidden), ("batch_size", batch_size), ("seed", seed)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise ParameterError(f"{name} ({value!r}) must be an integer")
    if epochs < 1:
        raise ParameterError(f"epochs ({epochs}) must be at least 1")
    if not lr > 0:
        raise ParameterError(f"lr ({lr}) must be positive")
    if hidden < 1:
        raise ParameterError(f"hidden ({hidden}) must be at least 1")
    if batch_size < 1:
        raise ParameterError(f"batch_size ({batch_size}) must be at least 1")
    if not 0 <= val_fraction < 1:
        raise ParameterError(f"val_fraction ({val_fraction}) must be at least 0 and below 1")
    if label and label not in LABEL_KINDS:
        raise ParameterError(f"label ({label!r}) must be one of {', '.join(LABEL_KINDS)}")
    if soft and soft not in SOFT_LABELS:
        raise ParameterError(f"soft ({soft!r}) must be one of {', '.join(SOFT_LABELS)}")
    base_json = _json_ready(dict(base or {}), "base")

    usable = y.max(axis=1) > 0
    n = int(usable.sum())
    if n < 2:
        raise ParameterError(f"router training needs at least 2 questions whose answer some level retrieves, got {n}")
    x, y = x[usable], y[usable]
    levels, dim = y.shape[1], x.shape[1]

    order = np.random.default_rng(seed).permutation(n)
    n_val = 0
    if n >= 5 and val_fraction > 0:
        n_val = min(max(1, round(val_fraction * n)), n - 2)
    val_idx, train_idx = np.sort(order[:n_val]), np.sort(order[n_val:])

    import torch  # heavy: only when training

    started = time.perf_counter()
    progress = progress or Progress()
    progress.set_unit("epochs")
    train_loss: list[float] = []
    val_loss: list[float] = []
    # A generator of our own, not torch.manual_seed: the global generator is shared with
    # every other thread (background jobs), so seeding it would be neither deterministic
    # nor harmless. nn.Linear and nn.Dropout draw from the global one, hence the plain MLP.
    gen = torch.Generator().manual_seed(seed)
    params = [_uniform(torch, shape, fan_in, gen) for shape, fan_in in _shapes(dim, hidden, levels)]
    w1, b1, w2, b2 = params

    def logits(inputs: Any, train: bool) -> Any:
        h = torch.relu(torch.nn.functional.linear(inputs, w1, b1))
        if train:  # inverted dropout, as nn.Dropout
            h = h * (torch.rand(h.shape, generator=gen) >= DROPOUT) / (1 - DROPOUT)
        return torch.nn.functional.linear(h, w2, b2)

    # Eq. 3 sums the loss over levels; averaged over questions it does not grow with n.
    loss_fn = torch.nn.BCEWithLogitsLoss(reduction="sum")
    optimizer = torch.optim.Adam(params, lr=lr)
    xt = torch.as_tensor(x[train_idx], dtype=torch.float32)
    yt = torch.as_tensor(y[train_idx], dtype=torch.float32)
    xv = torch.as_tensor(x[val_idx], dtype=torch.float32)
    yv = torch.as_tensor(y[val_idx], dtype=torch.float32)
    n_train = len(train_idx)
    for epoch in range(1, epochs + 1):
        for batch in torch.randperm(n_train, generator=gen).split(batch_size):
            optimizer.zero_grad()
            loss = loss_fn(logits(xt[batch], True), yt[batch]) / len(batch)
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            train_loss.append(float(loss_fn(logits(xt, False), yt)) / n_train)
            if n_val:
                val_loss.append(float(loss_fn(logits(xv, False), yv)) / n_val)
        progress(epoch, epochs)
    weights = [p.detach().numpy().astype(np.float32).copy() for p in params]

    meta = RouterMeta(
        levels=levels,
        base=base_json,
        embedder=str(embedder),
        embedder_fingerprint=str(embedder_fingerprint),
        label=label,
        soft=soft,
        dim=dim,
        hidden=hidden,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    best = np.argmax(y, axis=1)  # the first of equal labels: the finer level
    report = TrainReport(
        questions=n,
        dropped=int((~usable).sum()),
        validation=n_val,
        train_loss=tuple(train_loss),
        val_loss=tuple(val_loss),
        label_histogram=tuple(int(c) for c in np.bincount(best, minlength=levels)),
        seconds=round(time.perf_counter() - started, 3),
        epochs=epochs,
    )
    return _router(meta, weights, report), report


def _shapes(dim: int, hidden: int, levels: int) -> list[tuple[tuple[int, ...], int]]:
    """The shapes of w1, b1, w2, b2 and the fan-in of the layer each belongs to."""
    return [((hidden, dim), dim), ((hidden,), dim), ((levels, hidden), hidden), ((levels,), hidden)]


def _uniform(torch: Any, shape: tuple[int, ...], fan_in: int, gen: Any) -> Any:
    """A trainable tensor drawn as nn.Linear's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1.0 / fan_in**0.5
    return torch.empty(shape).uniform_(-bound, bound, generator=gen).requires_grad_()


def _router(meta: RouterMeta, weights: Sequence[np.ndarray], report: TrainReport | None) -> Router:
    """A Router over read-only copies of ``weights`` (w1, b1, w2, b2)."""
    frozen = []
    for w in weights:
        w = np.array(w, dtype=np.float32)
        w.setflags(write=False)
        frozen.append(w)
    return Router(meta, *frozen, report=report)


def cross_fit(
    vectors: np.ndarray,
    labels: np.ndarray,
    *,
    folds: int = 5,
    seed: int = 0,
    progress: Progress | None = None,
    **train_kwargs: Any,
) -> np.ndarray:
    """Level weights for every question from routers that never saw it (k-fold cross-fitting).

    The rows are split into ``folds`` folds by a permutation drawn from ``seed`` (it depends
    only on the number of rows and the seed, never on the labels); the rows of each fold are
    predicted by a router trained (:func:`train_router`, same ``seed``) on the other folds.
    So row ``i``'s weights do not depend on row ``i``'s own label. Rows whose labels are all
    zero are left out of training, as always, but still get predictions. A fold whose other
    folds hold fewer than 2 usable rows cannot train a router: its rows get the uniform
    weight 0.5 on every level.

    Args:
        vectors: ``(n, dim)`` query vectors.
        labels: ``(n, levels)`` soft labels.
        folds: Number of folds (at least 2; folds beyond ``n`` stay empty).
        seed: Seed of the fold split and of each fold's training.
        progress: Called as ``progress(done, folds * epochs)`` after each epoch of each
            fold; an exception it raises propagates.
        **train_kwargs: Passed to :func:`train_router` (``epochs``, ``hidden``, ``lr``…).

    Returns:
        ``(n, levels)`` float64 weights.

    Raises:
        ParameterError: Bad shapes or values, or ``folds`` below 2.
    """
    x, y = _check_data(vectors, labels)
    if folds < 2:
        raise ParameterError(f"folds ({folds}) must be at least 2")
    n, levels = y.shape
    epochs = int(train_kwargs.get("epochs", DEFAULT_EPOCHS))
    progress = progress or Progress()
    progress.set_unit("epochs")
    usable = y.max(axis=1) > 0
    out = np.full((n, levels), 0.5, dtype=np.float64)
    parts = np.array_split(np.random.default_rng(seed).permutation(n), folds)
    for k, held in enumerate(parts):
        if held.size == 0:
            continue
        rest = np.ones(n, dtype=bool)
        rest[held] = False
        if int((rest & usable).sum()) < 2:
            continue  # nothing to learn from: the fold keeps the uniform 0.5
        inner = progress.slice(k * epochs, epochs, folds * epochs)  # this fold's epochs of all folds'
        router, _ = train_router(x[rest], y[rest], seed=seed, progress=inner, **train_kwargs)
        out[held] = router.predict(x[held])
    return out


def save_router(router: Router, path: str | Path) -> Path:
    """Write ``router`` to ``path`` (any name; :data:`ROUTER_SUFFIX` is suggested), atomically.

    The file is an uncompressed ``.npz``: the arrays ``w1``, ``b1``, ``w2``, ``b2`` and
    ``header``, the UTF-8 JSON of ``{"format", "version", "meta", "report"}`` as a uint8 array.
    No pickled object is written, so :func:`load_router` can refuse any.

    Returns:
        The path written.
    """
    path = Path(path)
    header = {
        "format": _FORMAT,
        "version": router.meta.version,
        "meta": router.meta.to_json(),
        "report": router.report.to_json() if router.report is not None else None,
    }
    buf = io.BytesIO()
    arrays = dict(zip(_WEIGHTS, (router.w1, router.b1, router.w2, router.b2)))
    data = np.frombuffer(json.dumps(header, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
    np.savez(buf, **arrays, **{_HEADER: data})  # to a buffer: np.savez would append .npz to a path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".router-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(buf.getvalue())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_router(
    path: str | Path,
    *,
    levels: int | None = None,
    base: Mapping[str, Any] | None = None,
    embedder_fingerprint: str | None = None,
) -> Router:
    """Read a router file written by :func:`save_router`, and check it fits the caller's retriever.

    Args:
        path: The router file.
        levels: The retriever's number of levels; None skips the check.
        base: The retriever's description of its levels, compared for equality with the
            one the router was trained on; None skips the check.
        embedder_fingerprint: The fingerprint of the embedder of the query vectors; None
            skips the check.

    Returns:
        The router, with its training report when the file has one.

    Raises:
        InputError: One line naming the file: it is missing, not a router file or damaged
            (pickled objects included), over :data:`MAX_FILE_BYTES` unpacked, of a newer
            format version, or trained for another embedder, number of levels or set of levels.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"router file {path} does not exist")
    if not path.is_file():
        raise InputError(f"router file {path} is not a file")
    try:
        with path.open("rb") as f:
            magic = f.read(4)
        # Anything but a zip archive np.load would try to unpickle (and refuse): say what it is instead.
        if magic != b"PK\x03\x04":
            raise InputError(f"router file {path} is not a Chunk Lab router file (not an .npz archive)")
        with zipfile.ZipFile(path) as z:  # the sizes an archive declares, before inflating any of it
            size = sum(info.file_size for info in z.infolist())
        if size > MAX_FILE_BYTES:
            raise InputError(f"router file {path} unpacks to {size} bytes, over the {MAX_FILE_BYTES} a router may have")
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, NpzFile):
            raise InputError(f"router file {path} is not a Chunk Lab router file (not an .npz archive)")
        with loaded as npz:
            if _HEADER not in npz.files:
                raise InputError(f"router file {path} is not a Chunk Lab router file (no header)")
            header = json.loads(npz[_HEADER].tobytes().decode("utf-8"))
            if not isinstance(header, dict) or header.get("format") != _FORMAT:
                raise InputError(f"router file {path} is not a Chunk Lab router file")
            version = header.get("version")
            if not isinstance(version, int):
                raise InputError(f"router file {path} is damaged: no format version")
            if version > FORMAT_VERSION:
                raise InputError(
                    f"router file {path} has format version {version}, this Chunk Lab reads up to "
                    f"{FORMAT_VERSION} — update Chunk Lab or {_RETRAIN}"
                )
            weights = [npz[name] for name in _WEIGHTS]
        meta = RouterMeta(**header["meta"])
        report = TrainReport.from_json(header["report"]) if header.get("report") is not None else None
    except InputError:
        raise
    except (OSError, EOFError, ValueError, KeyError, TypeError, RecursionError, zipfile.BadZipFile) as e:
        raise InputError(one_line(f"router file {path} is not a router file or is damaged: {e}")) from e
    _check_weights(path, meta, weights)

    if embedder_fingerprint is not None and meta.embedder_fingerprint != embedder_fingerprint:
        raise InputError(
            f"router file {path} was trained for embedder {meta.embedder or '(unnamed)'} "
            f"(fingerprint {_short(meta.embedder_fingerprint)}), not fingerprint "
            f"{_short(embedder_fingerprint)} — {_RETRAIN}"
        )
    if levels is not None and meta.levels != levels:
        raise InputError(f"router file {path} has {meta.levels} levels, this retriever has {levels} — {_RETRAIN}")
    if base is not None:
        wanted = _json_ready(dict(base), "base")
        if meta.base != wanted:
            mine, theirs = _describe_pair(meta.base, wanted)
            raise InputError(
                one_line(f"router file {path} was trained on levels of {mine}, not {theirs} — {_RETRAIN}", 500)
            )
    return _router(meta, weights, report)


def _check_weights(path: Path, meta: RouterMeta, weights: Sequence[np.ndarray]) -> None:
    """InputError unless ``weights`` are finite float arrays of the shapes ``meta`` says."""
    sizes = (meta.levels, meta.dim, meta.hidden)
    if not all(isinstance(v, int) and v >= 1 for v in sizes) or not isinstance(meta.base, dict):
        raise InputError(f"router file {path} is damaged: bad levels, dim, hidden or base in its header")
    shapes = [(meta.hidden, meta.dim), (meta.hidden,), (meta.levels, meta.hidden), (meta.levels,)]
    for name, w, shape in zip(_WEIGHTS, weights, shapes):
        if w.dtype.kind != "f" or w.shape != shape or not np.all(np.isfinite(w)):
            raise InputError(
                f"router file {path} is damaged: {name} is {w.dtype} {w.shape}, expected finite floats {shape}"
            )


def _short(fingerprint: str, keep: int = 12) -> str:
    """A fingerprint cut to ``keep`` characters (with an ellipsis when cut); ``(none)`` when empty."""
    if not fingerprint:
        return "(none)"
    return fingerprint if len(fingerprint) <= keep else fingerprint[:keep] + "…"


def _describe_pair(a: dict, b: dict) -> tuple[str, str]:
    """Compact ``name(key=value, …)`` forms of two level descriptions, showing only what differs."""
    name_a, params_a = _split_base(a)
    name_b, params_b = _split_base(b)
    keys = list(dict.fromkeys([*params_a, *params_b]))
    differ = [k for k in keys if params_a.get(k, _MISSING) != params_b.get(k, _MISSING)]
    if name_a != name_b or not differ:
        differ = keys

    def show(name: str, params: dict) -> str:
        shown = [f"{k}={_value(params[k]) if k in params else '(unset)'}" for k in differ]
        if len([k for k in differ if k in params]) < len(params):
            shown.append("…")
        return f"{name}({', '.join(shown)})"

    return show(name_a, params_a), show(name_b, params_b)


_MISSING = object()


def _split_base(base: dict) -> tuple[str, dict]:
    """The retriever name and the flat parameters of a level description."""
    rest = dict(base)
    name = rest.pop("retriever", None) or rest.pop("name", None) or "levels"
    params = rest.pop("params", None)
    if isinstance(params, dict):
        rest = {**params, **rest}
    elif params is not None:
        rest["params"] = params
    return str(name), rest


def _value(value: Any) -> str:
    """A parameter value as it reads in a message: strings bare, the rest as compact JSON."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)

