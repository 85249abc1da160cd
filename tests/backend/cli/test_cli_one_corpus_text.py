"""One corpus text: ``eval`` and ``index`` read a document the same way, so they share one collection (issue 25).

``eval --questions sample:narrative`` read the corpus with its final newline (16,295
characters) and ``index sample:narrative`` through the loaders (16,294): one configuration
got two collections on the server. Both now go through the loaders (``corpus_document``).
"""

from __future__ import annotations

import json
import unicodedata

from backend.cli.common import load_input
from backend.loaders import load_bytes
from backend.retrieval.questions import corpus_document, load_sample_question_set
from backend.retrieval.store import ChunkStore
from tests.support.cli import run_main as run_cli


def test_a_sample_corpus_is_the_document_index_reads():
    qset = load_sample_question_set("narrative")
    corpus = qset.corpora["narrative_clockmaker"]
    doc, loaded = qset.document("narrative_clockmaker"), load_input("sample:narrative")
    assert (len(corpus), len(doc.text), len(loaded.text)) == (16_295, 16_294, 16_294)
    assert doc.id == loaded.id == qset.document_ids["narrative_clockmaker"]
    assert (doc.text, doc.paragraphs, doc.kind) == (loaded.text, loaded.paragraphs, loaded.kind)
    # Every question's excerpt is still at its offsets in the document's text.
    assert all(doc.text[s:e] == corpus[s:e] for q in qset.questions for s, e in q.spans)


def test_a_corpus_whose_offsets_loading_would_move_is_kept_as_the_reference_reads_it():
    trailing = "Line one.  \nLine two.\n"  # loading strips the spaces inside: offsets after them would move
    assert corpus_document(trailing, "c.txt").text == trailing
    decomposed = unicodedata.normalize("NFD", "Café au lait.\n\nSecond paragraph.\n")
    assert corpus_document(decomposed, "c.md").text == decomposed
    final_newlines = "First paragraph.\n\nSecond paragraph.\n\n\n"
    doc = corpus_document(final_newlines, "c.md")
    assert doc.text == final_newlines.rstrip() and doc.id == load_bytes(final_newlines.encode(), "c.md").id
    assert corpus_document("  \n", "c.txt").text == "  \n"  # nothing to load: kept


def test_eval_then_index_on_one_sample_share_one_collection(tmp_path):
    flags = ["--chunker", "recursive", "--param", "chunk_size=200"]
    proc = run_cli("eval", "--questions", "sample:narrative", *flags, "--json", data_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    store = tmp_path / "chroma"
    after_eval = ChunkStore(path=store).collections()
    assert len(after_eval) == 1
    proc = run_cli("index", "sample:narrative", *flags, data_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    info = json.loads(proc.stdout)
    assert info["reused"] is True and info["name"] == after_eval[0]["name"]
    assert ChunkStore(path=store).collections() == after_eval
