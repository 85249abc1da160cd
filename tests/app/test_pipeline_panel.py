""""Use in your pipeline" on the Compare cards (components/pipeline.py): a model-free configuration's spec, pip line,
three snippets and their download; an edited copy's tied note and its chunks' JSONL; an edited copy with no chunks;
and the session's models named in the code only where the app used them. The Tune result's panel is checked in
``test_tune_page.py``.
"""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from backend.chunkers import run_chunker
from backend.chunking import ConfigEntry
from backend.lab.edit import EditState, edit_copy
from backend.lab.snippet import SMOLLM2_LINE, pipeline_snippet
from backend.samples import load_sample
from components.state import normalized_config
from tests.support.apptest import TIMEOUT, open_page, recorded_downloads, run


def test_compare_cards_offer_the_snippet_and_an_edited_copy_its_chunks_as_data() -> None:
    doc = load_sample("technical")
    base = normalized_config("recursive", {"chunk_size": 120, "chunk_overlap": 0})
    edited = EditState.of(edit_copy(base, doc)).pushed(f"+{doc.sentences[4].start}").config
    broken = normalized_config("manual", {**edited.params_dict, "edits": "+99999999"})
    entries = [ConfigEntry(0, "A", base), ConfigEntry(1, "B", edited), ConfigEntry(2, "C", broken)]
    with recorded_downloads() as downloads:
        at = open_page("pages/compare.py", doc=doc, configs=entries)

    # A: a model-free configuration, in its card.
    (panel,) = at.get_by_key("cmp_card_0").expander
    assert panel.label == "Use in your pipeline" and panel.key == "cmp_pipe_0"
    snippet = pipeline_snippet(base, document=doc.source)
    spec, pip, plain, langchain, llamaindex = (c.value for c in panel.code)
    assert [c.language for c in panel.code] == ["plaintext", "bash", "python", "python", "python"]
    assert spec == base.spec and "chunk-lab[core]" in pip and "no torch needed" in panel.caption[0].value
    assert "chunklab.Chunker(" in plain and "ChunkLabTextSplitter(" in langchain
    assert "ChunkLabNodeParser(" in llamaindex
    assert [t.label for t in panel.tabs] == ["Plain", "LangChain", "LlamaIndex"]
    (button,) = panel.get("download_button")
    assert downloads.of(button) == (snippet.text().encode(), "chunklab-A__recursive.txt")

    # B: an edited copy says it is tied to the document and offers its chunks' JSONL under the name its code reads.
    panel = at.get_by_key("cmp_pipe_1")
    (note,) = panel.info
    assert "tied to that document" in note.value and "no splitter" in note.value
    tied = pipeline_snippet(edited, document=doc.source)
    assert tied.data_file == "technical_kestrel-edited-chunks.jsonl"
    assert all(f"open({tied.data_file!r}" in c.value for c in panel.code[2:])
    snippet_button, data_button = panel.get("download_button")
    assert data_button.key == "cmp_pipe_1_data"
    assert downloads.of(data_button) == (run_chunker(doc, edited).to_jsonl().encode(), tied.data_file)

    # C: an edited copy whose run failed has no chunks to offer yet: the note, no data download.
    panel = at.get_by_key("cmp_pipe_2")
    assert panel.info and [b.key for b in panel.get("download_button")] == ["cmp_pipe_2_snippet"]
    assert "once it has them" in panel.caption[-1].value


def _panels(lm: tuple[str, str | None] | None, embedder: str | None) -> None:
    import streamlit as st

    from backend.chunking import ChunkerConfig
    from components.keys import EMB_CHOICE, LM_CHOICE
    from components.pipeline import pipeline_panel, snippet_models

    st.session_state[LM_CHOICE] = lm
    st.session_state[EMB_CHOICE] = embedder
    for name in ("ppl", "llm_split", "semantic"):
        config = ChunkerConfig.make(name)
        lm_spec, emb_spec = snippet_models(config)
        pipeline_panel(config, None, "report.pdf", f"pipe_{name}", tag="A", lm=lm_spec, embedder=emb_spec)


def _plain(at: AppTest, name: str) -> str:
    return at.get_by_key(f"pipe_{name}").code[2].value


def test_the_code_names_the_sessions_models_only_where_the_app_used_them() -> None:
    at = run(AppTest.from_function(_panels, args=(("local", "/models/qwen.gguf"), "BAAI/bge-small-en"),
                                   default_timeout=TIMEOUT))
    assert "lm='/models/qwen.gguf'" in _plain(at, "ppl")
    assert "embedder='BAAI/bge-small-en'" in _plain(at, "semantic")
    # An LLM chunker runs the session's chat model, not its language model: the library's default chat model.
    assert "lm=" not in _plain(at, "llm_split") and SMOLLM2_LINE in at.get_by_key("pipe_llm_split").code[1].value
    at = run(AppTest.from_function(_panels, args=(("remote", None), None), default_timeout=TIMEOUT))
    assert "lm='remote'" in _plain(at, "ppl") and "embedder=" not in _plain(at, "semantic")
    at = run(AppTest.from_function(_panels, args=(None, None), default_timeout=TIMEOUT))
    assert "lm=" not in _plain(at, "ppl") and SMOLLM2_LINE in at.get_by_key("pipe_ppl").code[1].value
