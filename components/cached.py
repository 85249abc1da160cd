"""Cached calls into the backend.

Chunkings and document statistics are ``st.cache_data`` (bounded, keyed by the document id
and the configuration; the document itself is passed unhashed as ``_doc``). Bundled samples,
their question sets and the chunker specs are ``st.cache_resource``: shared by every session, never mutated.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from backend.chunkers import chunker_specs, run_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig, Chunking
from backend.lab.compare import stats_rows as compare_stats_rows
from backend.metrics.stats import document_stats as _document_stats
from backend.retrieval.questions import QuestionSet, load_sample_question_set
from backend.samples import list_question_sets, list_samples, load_sample
from backend.text.document import Document

__all__ = [
    "chunk_document",
    "chunk_with_model",
    "document_stats",
    "specs",
    "samples",
    "sample_document",
    "sample_question_sets",
    "sample_questions",
    "stats_rows",
]


@st.cache_data(max_entries=64, show_spinner=False)
def chunk_document(_doc: Document, doc_id: str, config: ChunkerConfig) -> Chunking:
    """``run_chunker(doc, config)``, cached per (document id, configuration)."""
    return run_chunker(_doc, config)


@st.cache_data(max_entries=64, show_spinner=False)
def chunk_with_model(_doc: Document, doc_id: str, config: ChunkerConfig, model: str, _context: ModelContext) -> Chunking:
    """``run_chunker(doc, config, context)`` for a model-backed chunker, cached per (document id, configuration, model).

    ``model`` is the model's fingerprint: the same configuration on another model is another
    result. The pages pass a cache-only context (``ModelContext.cache_only``), whose misses
    raise ``NotCached``; an exception is never cached, so a later call tries again.
    """
    return run_chunker(_doc, config, _context)


@st.cache_data(max_entries=16, show_spinner=False)
def document_stats(_doc: Document, doc_id: str) -> dict[str, Any]:
    """:func:`backend.metrics.stats.document_stats` (cl100k tokens), cached per document id."""
    return _document_stats(_doc, "cl100k")


@st.cache_data(max_entries=64, show_spinner=False)
def stats_rows(_doc: Document, _chunkings: tuple[Chunking, ...], key: tuple[tuple[str, ChunkerConfig], ...]) -> list[dict[str, Any]]:
    """:func:`backend.lab.compare.stats_rows`, cached per (document id, configuration) list."""
    return compare_stats_rows(len(_doc.text), _chunkings)


@st.cache_resource(show_spinner=False)
def specs() -> list[dict[str, Any]]:
    """The chunker registry as JSON-ready specs (see :func:`backend.chunkers.chunker_specs`)."""
    return chunker_specs()


@st.cache_resource(show_spinner=False)
def samples() -> list[Any]:
    """The bundled sample documents."""
    return list(list_samples())


@st.cache_resource(show_spinner=False, max_entries=16)
def sample_document(name: str) -> Document:
    """A bundled sample, loaded once per process."""
    return load_sample(name)


@st.cache_resource(show_spinner=False)
def sample_question_sets() -> list[Any]:
    """The bundled samples' question sets (:func:`backend.samples.list_question_sets`)."""
    return list_question_sets()


@st.cache_resource(show_spinner=False, max_entries=8)
def sample_questions(name: str) -> QuestionSet:
    """A bundled question set, loaded and validated once per process."""
    return load_sample_question_set(name)
