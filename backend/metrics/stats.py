"""Summary statistics of documents and chunkings (pure Python, used by the pages and the CLI)."""

from __future__ import annotations

import statistics
from typing import Any, Sequence

from backend.chunking import Chunking
from backend.text.document import Document
from backend.tokenizers import get_tokenizer

__all__ = ["chunking_stats", "document_stats"]


def document_stats(doc: Document, tokenizer: str = "cl100k") -> dict[str, Any]:
    """Characters, tokens, sentences, paragraphs, pages, language, kind and encoding of ``doc``."""
    return {
        "source": doc.source,
        "kind": doc.kind,
        "characters": len(doc.text),
        "tokens": get_tokenizer(tokenizer).count(doc.text),
        "tokenizer": tokenizer,
        "sentences": len(doc.sentences),
        "paragraphs": len(doc.paragraphs),
        "pages": len(doc.pages),
        "language": doc.language,
        "encoding": doc.encoding,
        "id": doc.id,
    }


def chunking_stats(chunkings: Sequence[Chunking]) -> list[dict[str, Any]]:
    """One row per chunking: chunk count, token statistics, mean characters and time.

    Overlap is reported as the number of characters covered by more than one chunk. The time
    is the whole cost of the chunking: ``time_ms`` the model work behind it (scoring,
    embedding, chat; read from the output cache or computed now) plus the cutting, None when a
    cached model output's time was not recorded; ``cut_ms`` the cutting alone; ``model_s`` the
    model seconds (None: unknown, or no model); ``time`` says it all in words, e.g.
    ``8 min 3 s (model 8 min 3 s, from the cache; cut 27 ms)``.
    """
    rows = []
    for ch in chunkings:
        tokens = ch.token_counts
        chars = [c.end - c.start for c in ch.chunks]
        overlap = 0
        reach = 0
        for c in ch.chunks:
            if c.start < reach:
                overlap += min(reach, c.end) - c.start
            reach = max(reach, c.end)
        rows.append(
            {
                "configuration": ch.config.label,
                "chunker": ch.config.name,
                "chunks": len(tokens),
                "mean_tokens": statistics.fmean(tokens) if tokens else 0.0,
                "median_tokens": statistics.median(tokens) if tokens else 0.0,
                "min_tokens": min(tokens, default=0),
                "max_tokens": max(tokens, default=0),
                "std_tokens": statistics.pstdev(tokens) if tokens else 0.0,
                "mean_chars": statistics.fmean(chars) if chars else 0.0,
                "overlap_chars": overlap,
                "time_ms": None if ch.total_s is None else ch.total_s * 1000.0,
                "cut_ms": ch.cut_s * 1000.0,
                "model_s": ch.model_time.seconds if ch.model_time is not None and ch.model_time.known else None,
                "time": ch.time_text,
            }
        )
        if ch.run_report:  # what the chunker reported about its run (e.g. an LLM chunker's content loss)
            rows[-1]["report"] = ch.run_report
    return rows
