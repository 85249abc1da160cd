"""Every baseline chunker on real documents of every format, through the loaders and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from backend.chunkers import make_chunker
from backend.loaders import load_document
from backend.samples import list_samples, load_sample
from backend.tokenizers import get_tokenizer
from tests.conftest import ROOT
from tests.invariants import check_invariants

CONFIGS = [
    ("fixed_token", {"chunk_size": 250, "chunk_overlap": 125}),
    ("fixed_token", {"chunk_size": 64}),
    ("recursive", {"chunk_size": 200}),
    ("recursive", {"chunk_size": 50, "chunk_overlap": 10}),
    ("sentence", {"chunk_size": 120, "chunk_overlap": 30}),
    ("paragraph", {"chunk_size": 300}),
]


def _documents(tmp: Path) -> dict[str, Path]:
    import docx

    out = {s.name: s.path for s in list_samples()}
    d = docx.Document()
    d.add_heading("Quarterly report", level=1)
    for i in range(30):
        d.add_paragraph(f"Section {i}. Revenue grew 3.{i}% in the U.S. market, e.g. in retail. Why? Demand.")
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "region", "growth"
    table.cell(1, 0).text, table.cell(1, 1).text = "EMEA", "2.5%"
    out["docx"] = tmp / "report.docx"
    d.save(out["docx"])
    out["html"] = tmp / "page.html"
    out["html"].write_text(
        "<html><head><style>p{color:red}</style><script>alert('x')</script></head><body>"
        + "".join(f"<p>Para {i} <b>bold</b> &amp; text.<img src=x onerror=alert(1)></p>" for i in range(40))
        + "<script>document.write('payload')</script></body></html>",
        encoding="utf-8",
    )
    out["gb18030"] = tmp / "chinese.txt"
    out["gb18030"].write_bytes(
        "\n\n".join(f"第{i}段：今天天气很好，我们去公园散步。你觉得呢？雨一直在下；下得不紧不慢！" for i in range(60)).encode(
            "gb18030"
        )
    )
    return out


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> dict[str, Path]:
    return _documents(tmp_path_factory.mktemp("docs"))


@pytest.mark.parametrize("name,params", CONFIGS, ids=[f"{n}-{'-'.join(map(str, p.values()))}" for n, p in CONFIGS])
def test_every_chunker_keeps_invariants_on_every_format(documents, name, params):
    tok = get_tokenizer("cl100k")
    for label, path in documents.items():
        doc = load_document(path)
        chunking = make_chunker(name, params).chunk(doc)
        assert len(chunking) > 0, label
        check_invariants(doc, chunking, params["chunk_size"], params.get("chunk_overlap", 0) > 0, tok)


def test_html_payloads_never_reach_the_text(documents):
    text = load_document(documents["html"]).text
    for needle in ("alert", "payload", "onerror", "color:red", "<"):
        assert needle not in text


def test_gb18030_text_is_decoded_and_chinese(documents):
    doc = load_document(documents["gb18030"])
    assert doc.encoding and doc.encoding.lower().replace("-", "") in {"gb18030", "gbk", "gb2312"}
    assert doc.language == "zh" and "公园散步" in doc.text


def test_cli_chunk_on_the_sample_pdf_agrees_with_the_api():
    path = next(s.path for s in list_samples() if s.path.suffix == ".pdf")
    proc = subprocess.run(
        [sys.executable, "-m", "backend", "chunk", str(path), "--chunker", "recursive", "--chunk_size", "200"],
        cwd=ROOT, capture_output=True, timeout=300, check=True,
    )
    records = [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines()]
    api = make_chunker("recursive", {"chunk_size": 200}).chunk(load_document(path))
    assert records == [c.to_json() for c in api.chunks]


def test_samples_cover_three_kinds_of_text():
    langs = {load_sample(s.name).language for s in list_samples()}
    assert {"en", "zh"} <= langs and len(list_samples()) >= 3
