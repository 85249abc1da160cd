"""The Edit page's live metrics panel: an edited copy against its base (statistics, BC/CS/DS, retrieval).

Owned by the metrics engineer of issue 26; this first version is the agreed signature only.
"""

from __future__ import annotations

from backend.chunking import Chunking, ConfigEntry
from backend.text.document import Document

__all__ = ["edit_metrics_panel"]


def edit_metrics_panel(
    doc: Document,
    base_entry: ConfigEntry | None,
    base: Chunking,
    edited_entry: ConfigEntry,
    edited: Chunking,
) -> None:
    """Draw the change of every metric from the base to the edited copy ("BC 0.91 → 0.89, IoU 6.1% → 6.4%").

    Args:
        doc: The document.
        base_entry: The base's configuration entry when the session lists it (its letter), else None.
        base: The base's chunking.
        edited_entry: The edited copy's entry (its current configuration).
        edited: The edited copy's chunking (the current edits).
    """
