"""A small question set in the Chroma report's folder format, made from the bundled narrative sample.

``DIR/questions_df.csv`` and ``DIR/corpora/narrative_clockmaker.txt``: the first ``CORPUS_CHARS`` characters of the
sample's text and those of its bundled questions whose excerpts lie in them (``reproduce chroma``'s input, small
enough that all eight rows of the paper's table run in seconds).
"""

from __future__ import annotations

from pathlib import Path

from backend.retrieval.questions import QuestionSet, load_sample_question_set, save_question_set

__all__ = ["CORPUS_CHARS", "chroma_folder"]

CORPUS_CHARS = 4000


def chroma_folder(folder: Path, questions: slice = slice(0, 4)) -> Path:
    """Write the set (its questions: ``questions`` of those that fit the cut corpus) into ``folder``; returns it."""
    sample = load_sample_question_set("narrative")
    (cid,) = sample.corpus_ids
    text = sample.corpora[cid][:CORPUS_CHARS]
    fitting = [q for q in sample.questions if max(e for _, e in q.spans) <= CORPUS_CHARS]
    chosen = QuestionSet(tuple(fitting[questions]), {cid: text}, {cid: ".txt"})
    save_question_set(chosen, folder / "questions_df.csv", folder / "corpora")
    return folder
