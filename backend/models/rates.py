"""How fast each model works on this machine: one store of measured rates, remembered across restarts.

Every cost estimate and ETA stands on a rate measured here, never on a figure typed into the
code. A rate is kept per model (its weights' fingerprint and kind), per device and precision,
and per kind of work (:data:`WORKS`):

- ``token_nll``: a scoring pass over a document (units: tokens scored; work: token-equivalents,
  the tokens a window feeds weighted by the attention they pay, see
  :func:`backend.models.scorer.window_work`; also the characters of text read);
- ``pairs``: conditional scoring of (context, continuation) pairs (units: pairs; work: the
  characters the model reads, each context counted once per group that shares it);
- ``embed``: embedding texts (units: texts; work: characters);
- ``chat``: chat replies of the LLM chunkers' chat model (units: replies; work: characters
  written; kind ``chat``, device and precision not known at that layer);
- ``chat_tokens``: a remote chat model's answers as its server counts them (units: completion
  tokens; work: prompt tokens; chars: prompt characters), which size its requests' timeouts
  (:func:`backend.models.chat.sized_timeout`).

(Question generation keeps its own rates, whose shape differs: load seconds, seconds per attempt
and attempts per kept question; see :mod:`backend.retrieval.generation`.)

Scorers and embedders record as they go (after each batch or group), so a long job teaches the
rate before it ends and the next estimate in the same process already uses it. The store keeps
about the last :data:`HORIZON_SECONDS` of measured work per key (older work is scaled down), so
it follows the machine when it gets busier or quieter. It lives in ``rates.json`` in the data
directory (:func:`backend.config.data_dir`, ``$CHUNKLAB_DATA_DIR``); a failed write only loses
the memory across restarts, never a result.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.config import data_dir
from backend.models.types import ModelInfo

__all__ = [
    "HORIZON_SECONDS",
    "RATES_FILE",
    "WORKS",
    "Rate",
    "RateKey",
    "RateStore",
    "rate_store",
]

RATES_FILE = "rates.json"  # in the data directory
# The kinds of work, and the unit each counts.
WORKS = {"token_nll": "tokens", "pairs": "pairs", "embed": "texts", "chat": "replies", "chat_tokens": "tokens"}
# Seconds of measured work a key keeps: older measurements are scaled down to this much, so the rate is recent.
HORIZON_SECONDS = 300.0


@dataclass(frozen=True)
class RateKey:
    """What a rate is measured for: a model (fingerprint and kind) on a device at a precision, doing one work.

    Attributes:
        model: The weights' fingerprint (:attr:`~backend.models.types.ModelInfo.fingerprint`).
        kind: ``lm``, ``remote-lm``, ``embedder``, ``chat``…
        device: ``cpu``, ``cuda:0``… (``""``: not known).
        dtype: ``float32``, ``bfloat16``… (``""``: not known).
        work: One of :data:`WORKS`.
    """

    model: str
    kind: str
    device: str
    dtype: str
    work: str

    def __post_init__(self) -> None:
        if self.work not in WORKS:
            raise ValueError(f"work {self.work!r} is not one of {', '.join(WORKS)}")

    @classmethod
    def of(cls, info: ModelInfo, work: str) -> RateKey:
        """The key of ``info``'s model doing ``work``."""
        return cls(info.fingerprint, info.kind, info.device, info.dtype, work)

    @property
    def text(self) -> str:
        """The key in the file: ``work|kind|model|device|dtype``."""
        return "|".join((self.work, self.kind, self.model, self.device, self.dtype))


@dataclass(frozen=True)
class Rate:
    """What was measured under one key (recent work only, see :data:`HORIZON_SECONDS`).

    Attributes:
        units: Units done (tokens, pairs, texts, replies: :data:`WORKS`).
        work: Their weight (token-equivalents or characters, see the module docstring).
        seconds: The seconds they took.
        chars: Characters of input read (0 when not counted).
        measured_at: When it was last updated (seconds since the epoch).
    """

    units: float
    work: float
    seconds: float
    chars: float = 0.0
    measured_at: float = 0.0

    @property
    def units_per_s(self) -> float:
        """Units per second."""
        return self.units / self.seconds

    @property
    def work_per_s(self) -> float:
        """Work per second (what ETAs are measured in)."""
        return self.work / self.seconds

    @property
    def chars_per_s(self) -> float | None:
        """Characters of input read per second (None: not counted)."""
        return self.chars / self.seconds if self.chars > 0 else None

    def to_json(self) -> dict[str, float]:
        """The file's form."""
        return {"units": self.units, "work": self.work, "seconds": self.seconds, "chars": self.chars,
                "measured_at": self.measured_at}

    @classmethod
    def from_json(cls, value: Any) -> Rate | None:
        """A rate from the file's form; None for anything unreadable or not positive."""
        try:
            rate = cls(float(value["units"]), float(value["work"]), float(value["seconds"]),
                       float(value.get("chars", 0.0)), float(value.get("measured_at", 0.0)))
        except (TypeError, KeyError, ValueError, AttributeError):
            return None
        numbers = (rate.units, rate.work, rate.seconds, rate.chars)
        if not all(math.isfinite(x) for x in numbers) or min(rate.units, rate.work, rate.seconds) <= 0 or rate.chars < 0:
            return None
        return rate


class RateStore:
    """The measured rates in one JSON file, safe across threads (writes are atomic; the last writer of a key wins).

    Args:
        path: The file (created on the first record).
        clock: Seconds since the epoch (injected by tests).
    """

    def __init__(self, path: Path, *, clock: Any = time.time) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.Lock()
        self._rates: dict[str, Rate] = self._read()

    def _read(self) -> dict[str, Rate]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(raw, dict):
            return {}
        rates = {str(k): Rate.from_json(v) for k, v in raw.items()}
        return {k: r for k, r in rates.items() if r is not None}

    def get(self, key: RateKey) -> Rate | None:
        """The rate measured under ``key``; None before its first measurement."""
        with self._lock:
            return self._rates.get(key.text)

    def find(self, model: str, work: str, *, kind: str | None = None, device: str | None = None,
             dtype: str | None = None) -> Rate | None:
        """The latest rate of ``model`` doing ``work`` on any device and precision not named; None: none measured.

        A page that has not loaded the model yet knows its fingerprint but not always its device or
        precision: the last one measured is the best word on how it runs here.
        """
        wanted = {"kind": kind, "device": device, "dtype": dtype}
        best: Rate | None = None
        with self._lock:
            for text, rate in self._rates.items():
                parts = text.split("|")
                if len(parts) != 5 or parts[0] != work or parts[2] != model:
                    continue
                got = {"kind": parts[1], "device": parts[3], "dtype": parts[4]}
                if any(v is not None and got[k] != v for k, v in wanted.items()):
                    continue
                if best is None or rate.measured_at > best.measured_at:
                    best = rate
        return best

    def of_model(self, info: ModelInfo, work: str) -> Rate | None:
        """The rate of ``info``'s model doing ``work`` on its device and precision (any, where ``info`` does not say)."""
        return self.find(info.fingerprint, work, kind=info.kind, device=info.device or None, dtype=info.dtype or None)

    def record(self, key: RateKey, units: float, work: float, seconds: float, chars: float = 0.0) -> Rate | None:
        """Add a measurement (``units`` weighing ``work`` done in ``seconds``) to ``key``'s rate, and save it.

        Too small a measurement (no unit, no time) changes nothing. Older measurements are scaled
        down to :data:`HORIZON_SECONDS` seconds first.

        Returns:
            The updated rate (None: nothing measured under ``key`` yet).
        """
        if not (units > 0 and work > 0 and seconds > 0 and all(map(math.isfinite, (units, work, seconds, chars)))):
            return self.get(key)
        with self._lock:
            old = self._rates.get(key.text)
            if old is not None and old.seconds + seconds > HORIZON_SECONDS:
                keep = max(HORIZON_SECONDS - seconds, 0.0) / old.seconds
                old = Rate(old.units * keep, old.work * keep, old.seconds * keep, old.chars * keep)
            if old is None or old.seconds <= 0:
                old = Rate(0.0, 0.0, 0.0)
            rate = Rate(old.units + units, old.work + work, old.seconds + seconds, old.chars + max(chars, 0.0),
                        float(self._clock()))
            self._rates[key.text] = rate
            self._save()
        return rate

    def _save(self) -> None:
        """Write the file atomically, keeping other processes' keys (read back first)."""
        merged = self._read()
        merged.update(self._rates)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps({k: r.to_json() for k, r in sorted(merged.items())}, indent=1),
                           encoding="utf-8")
            tmp.replace(self.path)
        except OSError:
            pass  # an estimate is a convenience: a read-only data directory only forgets it across restarts


_stores: dict[Path, RateStore] = {}
_stores_lock = threading.Lock()


def rate_store() -> RateStore:
    """The process's store for the data directory in use (:func:`backend.config.data_dir`; one per directory)."""
    path = data_dir() / RATES_FILE
    with _stores_lock:
        store = _stores.get(path)
        if store is None:
            store = _stores[path] = RateStore(path)
        return store
