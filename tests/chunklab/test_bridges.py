"""The LangChain and LlamaIndex bridges give exactly ``python -m backend chunk``'s spans and texts.

Every model-free chunker on every bundled sample (with defaults, and with overlap where a chunker
has one), an edited copy, and a model-backed chunker on the bundled embedder, each through both
bridges, against the CLI's JSONL for the same file. The CLI runs in-process (``backend.cli.main.main``,
what ``python -m backend`` calls); one run is also a real ``python -m backend chunk`` process.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from langchain_core.documents import Document as LCDocument
from llama_index.core import Document as LIDocument
from llama_index.core.node_parser import TokenTextSplitter
from llama_index.core.schema import MetadataMode

import chunklab
from backend.chunkers import REGISTRY
from backend.cli.main import main
from backend.samples import list_samples, load_sample
from chunklab.integrations.langchain import ChunkLabTextSplitter
from chunklab.integrations.llamaindex import ChunkLabNodeParser
from tests.conftest import ROOT

SAMPLES = tuple(s.name for s in list_samples())
MODEL_FREE = tuple(name for name, cls in sorted(REGISTRY.items()) if not cls.needs and name != "manual")
SPECS = (
    *MODEL_FREE,
    "recursive chunk_size=120 chunk_overlap=40",
    "sentence chunk_size=80 chunk_overlap=30",
    "fixed_token chunk_size=50 chunk_overlap=10",
    "manual 'base=recursive chunk_size=200' edits=+300,+900",
)


def _cli(capsysbinary, file: str, spec: str, *extra: str) -> list[tuple[int, int, str]]:
    config = chunklab.Chunker(spec).config
    argv = ["chunk", file, "--chunker", config.name, "--tokenizer", config.tokenizer, *extra]
    for key, value in config.params:
        argv += ["--param", f"{key}={value}"]
    assert main(argv) == 0
    rows = [json.loads(line) for line in capsysbinary.readouterr().out.decode().splitlines()]
    return [(r["start"], r["end"], r["text"]) for r in rows]


def _langchain(splitter: ChunkLabTextSplitter, text: str) -> list[tuple[int, int, str]]:
    docs = splitter.create_documents([text], [{"source": "s"}])
    assert all(d.metadata["source"] == "s" for d in docs)
    assert splitter.split_text(text) == [d.page_content for d in docs]
    return [(d.metadata["start_index"], d.metadata["end_index"], d.page_content) for d in docs]


def _llamaindex(parser: ChunkLabNodeParser, text: str) -> list[tuple[int, int, str]]:
    nodes = parser.get_nodes_from_documents([LIDocument(text=text, metadata={"source": "s"})])
    assert all(n.metadata["source"] == "s" for n in nodes)
    return [(n.start_char_idx, n.end_char_idx, n.text) for n in nodes]


@pytest.mark.parametrize("spec", SPECS)
def test_bridges_equal_the_cli_on_every_sample(spec, capsysbinary):
    splitter, parser = ChunkLabTextSplitter(spec), ChunkLabNodeParser(spec)
    for sample in SAMPLES:
        text = load_sample(sample).text  # what `python -m backend text sample:NAME` prints
        want = _cli(capsysbinary, f"sample:{sample}", spec)
        assert want and all(text[s:e] == t for s, e, t in want)
        assert _langchain(splitter, text) == want, sample
        assert _llamaindex(parser, text) == want, sample


def test_a_real_cli_process_prints_what_the_bridges_give():
    path = ROOT / "assets/samples/technical_kestrel.pdf"
    cmd = [sys.executable, "-m", "backend", "chunk", str(path), "--chunker", "recursive", "--chunk_size", "150"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    text = chunklab.load(path).text
    assert _langchain(ChunkLabTextSplitter("recursive chunk_size=150"), text) == [
        (r["start"], r["end"], r["text"]) for r in rows
    ]


def test_a_model_backed_chunker_through_both_bridges_equals_the_cli(capsysbinary):
    # The bundled all-MiniLM-L6-v2 in both; the CLI and the bridges each compute (no output cache).
    chunker = chunklab.Chunker("semantic breakpoint=percentile amount=80", cache=False)
    text = load_sample("release-notes").text
    want = _cli(capsysbinary, "sample:release-notes", chunker.spec, "--no-cache")
    assert len(want) > 2
    assert _langchain(ChunkLabTextSplitter(chunker), text) == want
    embedder = chunker.context.embedder
    assert embedder is not None  # loaded by the first bridge's call …
    assert _llamaindex(ChunkLabNodeParser(chunker), text) == want
    assert chunker.context.embedder is embedder  # … and kept for the second: once per chunker object


def test_repeated_passages_get_their_own_offsets():
    # LangChain's own start_index search finds a repeated chunk's first occurrence; the spans do not.
    text = ("The same paragraph, said again.\n\n" * 6).strip()
    spec = "paragraph chunk_size=8"
    want = [(c.start, c.end, c.text) for c in chunklab.Chunker(spec).chunk(text)]
    assert len(want) == 6 and len({t for _, _, t in want}) == 1
    assert _langchain(ChunkLabTextSplitter(spec), text) == want
    assert _llamaindex(ChunkLabNodeParser(spec), text) == want


def test_split_documents_keeps_metadata_and_nodes_embed_only_their_text():
    splitter = ChunkLabTextSplitter("recursive chunk_size=20")
    docs = splitter.split_documents([LCDocument(page_content="One. " * 40, metadata={"page": 3})])
    assert len(docs) > 1 and all(d.metadata["page"] == 3 and d.metadata["chunker"] for d in docs)
    assert splitter.transform_documents([LCDocument(page_content="Two. " * 40)])[1].metadata["chunk_index"] == 1
    doc = LIDocument(text="Three. " * 40, excluded_embed_metadata_keys=["file"])
    nodes = ChunkLabNodeParser("recursive chunk_size=20").get_nodes_from_documents([doc])
    assert nodes[0].get_content(metadata_mode=MetadataMode.EMBED) == nodes[0].text
    assert doc.excluded_embed_metadata_keys == ["file"]  # the nodes' own lists, not the document's, were extended
    assert nodes[0].metadata["tokens"] > 0


def test_a_bad_spec_is_one_line_naming_the_choices():
    with pytest.raises(chunklab.ParameterError, match="unknown chunker 'recursiv'; choose one of: cluster"):
        ChunkLabTextSplitter("recursiv chunk_size=200")
    with pytest.raises(chunklab.ParameterError, match="chunk_size"):
        ChunkLabNodeParser("recursive chunk_size=-3")


def test_nodes_link_like_llamaindex_own_parsers():
    doc = LIDocument(text="Four. " * 60, metadata={"file": "a.txt"})
    ours = ChunkLabNodeParser("recursive chunk_size=20").get_nodes_from_documents([doc])
    theirs = TokenTextSplitter(chunk_size=20, chunk_overlap=0).get_nodes_from_documents([doc])
    for nodes in (ours, theirs):
        assert len(nodes) > 2 and nodes[0].prev_node is None and nodes[-1].next_node is None
        assert [n.next_node.node_id for n in nodes[:-1]] == [n.node_id for n in nodes[1:]]
        assert [n.prev_node.node_id for n in nodes[1:]] == [n.node_id for n in nodes[:-1]]
        assert {n.ref_doc_id for n in nodes} == {doc.doc_id} and all(n.metadata["file"] == "a.txt" for n in nodes)
    assert set(ours[1].relationships) == set(theirs[1].relationships)
