"""The Quality page's table: the backend's quality rows as a styled DataFrame.

The numbers are :func:`backend.metrics.report.table_rows`, the computation behind the CLI's
``metrics`` too; this module only lays them out: one row per configuration, each metric
column's best value highlighted (which way is best comes from
:data:`~backend.metrics.report.METRIC_TABLE`). The figures are in :mod:`backend.figures.quality`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import streamlit as st

from backend.metrics.cost import DEFAULT_PAIR_WINDOW
from backend.metrics.quality import DEFAULT_K
from backend.metrics.report import BEST, COLUMNS, METRIC_TABLE, QualitySettings
from components.keys import EMB_INFO, QUALITY
from components.views import export_name

if TYPE_CHECKING:
    import pandas as pd
    from pandas.io.formats.style import Styler

__all__ = [
    "CHUNKER_WIDTH",
    "best_cells",
    "column_config",
    "column_width",
    "csv_file_name",
    "embedder_identity",
    "embedder_loader",
    "page_settings",
    "quality_frame",
    "styled_table",
]

CHUNKER_WIDTH = 190  # pixels of the configuration label column (the table's only long text)
HIGHLIGHT = "background-color: #dcfce7; font-weight: 600"
_FORMATS = {"mean_tokens": "{:.1f}", "bc": "{:.4f}", "cs_complete": "{:.3f}", "cs_incomplete": "{:.3f}", "ds": "{:.4f}"}


def quality_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The rows of :func:`~backend.metrics.report.table_rows` as a DataFrame indexed by tag; a missing metric is ``nan``."""
    import pandas as pd

    frame = pd.DataFrame(list(rows), columns=list(COLUMNS))
    metrics = [m.name for m in METRIC_TABLE]
    frame[metrics] = frame[metrics].astype(float)  # None (not computed) → nan
    return frame.set_index("configuration", drop=False)


def best_cells(table: pd.DataFrame) -> dict[str, list[Any]]:
    """Per metric column, the index labels of its best value (ties all count; an all-``nan`` column: none)."""
    out: dict[str, list[Any]] = {}
    for col, how in BEST.items():
        if col not in table:
            continue
        values = table[col].astype(float)
        if values.notna().sum() == 0:
            out[col] = []
            continue
        best = values.max() if how == "max" else values.min()
        out[col] = [i for i, v in values.items() if np.isfinite(v) and math.isclose(v, best, abs_tol=1e-12)]
    return out


def styled_table(table: pd.DataFrame) -> Styler:
    """The table with each metric column's best value highlighted (a pandas ``Styler``)."""
    best = best_cells(table)

    def mark(col: pd.Series) -> list[str]:
        winners = set(best.get(col.name, ()))
        return [HIGHLIGHT if i in winners else "" for i in col.index]

    shown = table.drop(columns=["configuration"])
    formats = {c: _FORMATS.get(c, "{:.4f}") for c in ("mean_tokens", *BEST)}
    return shown.style.apply(mark, axis=0, subset=[c for c in BEST if c in shown]).format(formats, na_rep="—")


def column_width(label: str) -> int:
    """Pixels that show a numeric column's header ``label`` whole (about 7 px a character, 28 px of padding)."""
    return max(65, 28 + 7 * len(label))


def column_config() -> dict[str, Any]:
    """``st.dataframe``'s column configuration of the table: headers and help from the metric table.

    Every column has a fixed width — the configuration's label (``CHUNKER_WIDTH``; hover or
    the CSV for all of it) and each number column as wide as its header — so the whole table,
    DS included, fits the wide layout's main column on a 1280-pixel screen instead of a long
    label pushing the last metrics out of sight.
    """
    config: dict[str, Any] = {
        "_index": st.column_config.TextColumn("", width=40),
        "chunker": st.column_config.TextColumn(
            "Chunker", width=CHUNKER_WIDTH, help="The configuration (its full label is in the CSV)."
        ),
        "chunks": st.column_config.NumberColumn("Chunks", format="%d", width=column_width("Chunks")),
        "mean_tokens": st.column_config.Column("Mean tokens", width=column_width("Mean tokens")),
    }
    for m in METRIC_TABLE:
        config[m.name] = st.column_config.Column(m.label, help=m.help, width=column_width(m.label))
    return config


def csv_file_name(doc_source: str, settings: QualitySettings) -> str:
    """The table's CSV file name: the document, then the settings it was computed under.

    >>> csv_file_name("My report.pdf", QualitySettings(K=0.8))
    'My-report__quality-K0.80-cs_paper-bc_reference.csv'
    """
    view = f"quality-K{settings.K:.2f}-cs_{settings.cs_rule}-bc_{settings.bc_mode}"
    if settings.delta:
        view += f"-delta{settings.delta}"
    if settings.window:
        view += f"-w{settings.window}"
    return f"{export_name(doc_source, view)}.csv"


def page_settings() -> QualitySettings:
    """The Quality page's K, CS rule, BC mode, δ and pair window as this session last set them (else its defaults).

    The Summary computes its BC, CS and DS under these, so its numbers are the Quality page's.
    """
    state = st.session_state
    return QualitySettings(
        K=float(state.get("qual_K", DEFAULT_K)),
        bc_mode=state.get(QUALITY("bc_mode")) or "reference",
        cs_rule=state.get(QUALITY("cs_rule")) or "paper",
        delta=int(state.get(QUALITY("delta"), 0)),
        window=int(state.get(QUALITY("window"), DEFAULT_PAIR_WINDOW)) or None,
    )


@st.cache_resource(show_spinner=False, max_entries=4)
def _default_embedder_fingerprint(env_spec: str) -> str | None:
    """The default embedder's (``CHUNKLAB_EMBEDDER`` = ``env_spec``) weight fingerprint, without loading it."""
    from backend.errors import ModelError
    from backend.models.identity import embedder_fingerprint_without_loading

    try:
        return embedder_fingerprint_without_loading(None)
    except (ModelError, OSError):  # no way to know it without loading: the job will load it
        return None


def embedder_identity() -> tuple[str | None, str]:
    """``(fingerprint or None, name)`` of the embedder DS uses: the session's, else the default."""
    from backend.config import default_embedder_spec

    info = st.session_state.get(EMB_INFO)
    if info is not None:
        return info.fingerprint, info.name
    return _default_embedder_fingerprint(default_embedder_spec()), "default embedder"


def embedder_loader() -> Callable[[], Any]:
    """A function a job calls to get the embedder DS uses: the session's (loaded already), else the default."""
    if st.session_state.get(EMB_INFO) is not None:
        from components.models import current_embedder

        emb = current_embedder()
        return lambda: emb
    from backend.models.embedder import load_embedder

    return lambda: load_embedder(None)
