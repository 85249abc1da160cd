"""Hostile input: each case gives a correct document (loader and chunk invariants hold, offsets
are exact slices) or one clear line (an InputError, CLI exit 1), quickly, and nothing outside
the data directory is read or written because of a file's content or name."""

from __future__ import annotations

import io
import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from backend.chunkers import make_chunker
from backend.errors import BinaryDataError, CorruptFileError, FileTooLargeError, InputError, NoTextLayerError
from backend.loaders import load_bytes
from backend.loaders.invariants import document_problems
from backend.report.session import parse_session, session_path
from backend.retrieval.questions import QuestionSet, parse_questions_csv, question_set_zip, save_question_set
from backend.text.document import Document
from backend.tokenizers import get_tokenizer
from tests.invariants import check_invariants
from tests.support.cli import run_main


def checked(document: Document) -> Document:
    """The document, once its loader invariants and every baseline chunker's invariants hold."""
    assert document_problems(document) == []
    tokenizer = get_tokenizer("cl100k")
    for name, params in (("recursive", {"chunk_size": 12}), ("fixed_token", {"chunk_size": 5, "chunk_overlap": 2}),
                         ("sentence", {"chunk_size": 16})):
        chunking = make_chunker(name, params).chunk(document)
        check_invariants(document, chunking, params["chunk_size"], "chunk_overlap" in params, tokenizer)
    return document


def paragraphs(document: Document) -> list[str]:
    return [span.slice(document.text) for span in document.paragraphs]


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert message and "\n" not in message and "Traceback" not in message
    return message


# --- DOCX ----------------------------------------------------------------------------------------------


def _docx(body_text: str = "PLACEHOLDER") -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph(f"Hello {body_text} world.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _with_document_xml(edit) -> bytes:
    """The small .docx with its ``word/document.xml`` passed through ``edit`` (bytes to bytes)."""
    source = zipfile.ZipFile(io.BytesIO(_docx()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            content = source.read(info.filename)
            archive.writestr(info.filename, edit(content) if info.filename == "word/document.xml" else content)
    return out.getvalue()


def _doctype(entities: str, reference: str):
    def edit(xml: bytes) -> bytes:
        text = xml.decode()
        end = text.index("?>") + 2
        text = text[:end] + f"<!DOCTYPE w:document [{entities}]>" + text[end:]
        return text.replace("PLACEHOLDER", reference).encode()

    return edit


LAUGHS = '<!ENTITY a "AAAAAAAAAA">' + "".join(
    f'<!ENTITY {b} "{("&" + a + ";") * 10}">' for a, b in zip("abcdefg", "bcdefgh")
)


def test_docx_entity_bomb_is_one_line() -> None:
    with pytest.raises(CorruptFileError) as error:
        load_bytes(_with_document_xml(_doctype(LAUGHS, "&h;")), "laughs.docx")
    assert one_line(error) == (
        "'laughs.docx' cannot be read: its XML defines entities that expand too much (an XML bomb)"
    )


def test_docx_external_entity_is_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT", encoding="utf-8")
    data = _with_document_xml(_doctype(f'<!ENTITY x SYSTEM "{secret.as_uri()}">', "&x;"))
    doc = checked(load_bytes(data, "xxe.docx"))
    assert "TOP-SECRET" not in doc.text and doc.text.startswith("Hello")


def test_docx_xml_past_the_limit_is_refused_before_parsing() -> None:
    data = _with_document_xml(lambda xml: xml.replace(b"PLACEHOLDER", b"word " * 400_000))  # 2 MB of XML
    assert len(data) < 100_000
    with pytest.raises(FileTooLargeError) as error:
        load_bytes(data, "wordy.docx", max_bytes=200_000)  # XML may be 5 x 200 kB
    assert one_line(error).startswith("'wordy.docx' holds 2.")
    assert str(error.value).endswith("MB of XML when unpacked; the limit is 1.0 MB")


def test_docx_text_run_over_10_mb_and_deep_nesting_are_one_line() -> None:
    huge = _with_document_xml(lambda xml: xml.replace(b"PLACEHOLDER", b"word " * 2_200_000))
    with pytest.raises(CorruptFileError) as error:
        load_bytes(huge, "huge.docx")
    assert one_line(error) == "'huge.docx' cannot be read: it has a run of text longer than 10 MB"
    nest = 300

    def deep(xml: bytes) -> bytes:
        text = xml.decode()
        text = text.replace("<w:body>", "<w:body>" + "<w:sdt><w:sdtContent>" * nest, 1)
        return text.replace("</w:body>", "</w:sdtContent></w:sdt>" * nest + "</w:body>").encode()

    with pytest.raises(CorruptFileError) as error:
        load_bytes(_with_document_xml(deep), "deep.docx")
    assert one_line(error) == "'deep.docx' cannot be read: its XML is nested more than 256 levels deep"


def test_docx_whose_zip_lies_about_sizes_is_corrupt() -> None:
    data = bytearray(_with_document_xml(lambda xml: xml.replace(b"PLACEHOLDER", b"x" * 300_000)))
    name = b"word/document.xml"
    for signature, name_len_at, size_at, header in ((b"PK\x01\x02", 28, 24, 46), (b"PK\x03\x04", 26, 22, 30)):
        at = data.find(signature)
        while at >= 0:
            length = int.from_bytes(data[at + name_len_at : at + name_len_at + 2], "little")
            if data[at + header : at + header + length] == name:
                data[at + size_at : at + size_at + 4] = (1000).to_bytes(4, "little")  # claims 1 kB
            at = data.find(signature, at + 4)
    with pytest.raises(CorruptFileError) as error:
        load_bytes(bytes(data), "liar.docx")
    assert one_line(error) == "'liar.docx' is not a valid .docx file (damaged, or not a Word document)"


# --- PDF -----------------------------------------------------------------------------------------------


def _blank_pdf(pages: int, last_text: str | None = None) -> bytes:
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer)
    for i in range(pages):
        if last_text and i == pages - 1:
            pdf.drawString(72, 700, last_text)
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def test_pdf_with_thousands_of_empty_pages() -> None:
    with pytest.raises(NoTextLayerError) as error:
        load_bytes(_blank_pdf(3000), "blank.pdf")
    assert one_line(error) == "'blank.pdf' has no extractable text; OCR is not supported"
    doc = checked(load_bytes(_blank_pdf(3000, "Only the last page speaks."), "late.pdf"))
    assert doc.text == "Only the last page speaks." and len(doc.pages) == 3000
    assert doc.page_of(0) == 3000


# --- HTML ----------------------------------------------------------------------------------------------


def test_html_100k_nested_divs_keep_all_their_text() -> None:
    depth = 100_000
    markup = "<p>Before.</p>" + "<div>" * depth + "Deep text." + "</div>" * depth + "<p>After.</p>"
    assert paragraphs(checked(load_bytes(markup.encode(), "deep.html"))) == ["Before.", "Deep text.", "After."]
    unclosed = "<p>Start.</p>" + "<span><b>" * 50_000 + "Never closed."
    assert checked(load_bytes(unclosed.encode(), "open.html")).text == "Start.\n\nNever closed."
    hidden = "<div hidden>" + "<div>" * 5000 + "secret" + "</div>" * 5000 + "</div><p>Shown.</p>"
    assert checked(load_bytes(hidden.encode(), "hidden.html")).text == "Shown."


def test_cli_on_deep_html_prints_the_text(tmp_path: Path) -> None:
    path = tmp_path / "deep.html"
    path.write_text("<div>" * 100_000 + "Deep text." + "</div>" * 100_000, encoding="utf-8")
    proc = _cli("text", str(path))
    assert proc.returncode == 0 and proc.stdout.decode().strip() == "Deep text.", proc.stderr.decode()


# --- NUL bytes and invalid UTF-8 -----------------------------------------------------------------------

PROSE = "Grüße aus Köln: schöne Straßen, Café am Rhein. " * 20


@pytest.mark.parametrize("name", ["notes.txt", "notes.md", "page.html"])
def test_a_few_nul_bytes_are_dropped(name: str) -> None:
    body = PROSE.encode() + b"Null\x00byte in\x00side." + PROSE.encode()
    if name.endswith(".html"):
        body = b"<p>" + body + b"</p>"
    doc = checked(load_bytes(body, name))
    assert "Nullbyte inside." in doc.text and "\x00" not in doc.text and doc.encoding == "utf-8"


@pytest.mark.parametrize("name", ["notes.txt", "notes.md", "page.html"])
def test_mostly_nul_bytes_are_one_line(name: str) -> None:
    with pytest.raises(BinaryDataError) as error:
        load_bytes(b"a\x00b\x00\x00\x00c\x00" * 100, name)
    assert one_line(error) == f"'{name}' looks like binary data, not text"


@pytest.mark.parametrize("name", ["notes.txt", "notes.md", "page.html"])
def test_invalid_utf8_bytes_become_replacement_marks_not_mojibake(name: str) -> None:
    # a stray Latin-1 byte, a cut sequence, an encoded surrogate and an overlong form, in UTF-8 prose
    body = PROSE.encode() + b"bad \xff here, cut \xc3( there, \xed\xa0\x80 and \xc0\xaf. " + PROSE.encode()
    if name.endswith(".html"):
        body = b'<meta charset="utf-8"><p>' + body + b"</p>"
    doc = checked(load_bytes(body, name))
    assert doc.encoding == "utf-8"
    assert doc.text.count("Grüße aus Köln") == 40 and "Ã" not in doc.text
    assert "bad \ufffd here, cut \ufffd( there," in doc.text


def test_latin1_text_is_still_read_as_windows_1252() -> None:
    doc = checked(load_bytes("Grüße aus Köln, schöne Straßen.".encode("latin-1") * 10, "latin.txt"))
    assert doc.encoding == "cp1252" and doc.text.startswith("Grüße aus Köln")


# --- right-to-left scripts, combining marks, emoji -------------------------------------------------------

RTL = (
    "مرحبا بالعالم. هذا نص عربي للاختبار، وفيه جملة ثانية.\n\n"
    "שלום עולם. זהו טקסט בעברית עם ניקוד: שָׁלוֹם.\n\n"
    "Combining: e\u0301 n\u0303 a\u0308\u0304 Z\u0351\u0352\u0353 q\u0307\u0323.\n\n"
    "Emoji: 👨\u200d👩\u200d👧\u200d👦 family, 🏳️\u200d🌈 flag, 👍🏽 thumbs. Mixed עברית and English."
)


@pytest.mark.parametrize("name", ["rtl.txt", "rtl.md", "rtl.html"])
def test_rtl_combining_marks_and_zwj_emoji(name: str) -> None:
    body = RTL if not name.endswith(".html") else "<p>" + RTL.replace("\n\n", "</p><p>") + "</p>"
    doc = checked(load_bytes(body.encode(), name))
    import unicodedata

    assert doc.text == unicodedata.normalize("NFC", RTL)
    assert "👨\u200d👩\u200d👧\u200d👦" in doc.text  # zero-width joiners are kept
    assert "q\u0323\u0307" in doc.text  # canonical order of the combining marks
    assert len(doc.paragraphs) == 4 and paragraphs(doc)[0].startswith("مرحبا")
    for chunk in make_chunker("recursive", {"chunk_size": 8}).chunk(doc).chunks:
        assert doc.text[chunk.start : chunk.end] == chunk.text


# --- names -----------------------------------------------------------------------------------------------

HOSTILE_NAMES = [
    ("<img src=x onerror=alert(1)>.txt", "<img src=x onerror=alert(1)>.txt"),
    ("<script>alert(1)</script>.txt", "script>.txt"),  # "/" separates folders, whatever surrounds it
    ("../../x.txt", "x.txt"),
    ("a/b\\c.pdf.txt", "c.pdf.txt"),
    ("C:\\Users\\me\\..\\evil.md", "evil.md"),
]


@pytest.mark.parametrize(("name", "source"), HOSTILE_NAMES)
def test_a_name_never_carries_a_folder(name: str, source: str) -> None:
    assert load_bytes(b"Some text.", name).source == source


def test_cli_error_names_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "<img src=x onerror=alert(1)>.txt"
    path.write_bytes(b"\x00\x01\x02\x03" * 100)
    proc = _cli("text", str(path))
    err = proc.stderr.decode().strip()
    assert proc.returncode == 1 and len(err.splitlines()) == 1 and "looks like binary data" in err


# --- session and question files ---------------------------------------------------------------------------


def _session(models: dict) -> str:
    return json.dumps({
        "format": "chunklab-session", "version": 1,
        "document": {"sample": None, "name": "x.txt", "sha": "0123456789abcdef"},
        "configs": [{"tag": "A", "chunker": "recursive", "params": {"chunk_size": 200}}],
        "models": models, "settings": {},
    })


@pytest.mark.parametrize("spec", ["/etc", "../../models/evil", "~/model.gguf", "C:\\models\\x", "a/b/c"])
def test_a_session_naming_a_model_outside_the_data_dir_is_refused(spec, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(InputError) as error:
        parse_session(_session({"lm": {"kind": "local", "spec": spec}}), source="evil.json")
    assert one_line(error).startswith("evil.json: the lm model ") and "outside the data directory" in str(error.value)
    with pytest.raises(InputError, match="the embedder model"):
        parse_session(_session({"embedder": {"spec": spec}}), source="evil.json")


def test_a_session_may_name_hub_ids_bundled_models_and_models_in_the_data_dir(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    inside = tmp_path / "data" / "models" / "mine"
    inside.mkdir(parents=True)
    for spec in ("smollm2", "HuggingFaceTB/SmolLM2-135M", str(inside), None):
        session = parse_session(_session({"lm": {"kind": "local", "spec": spec}, "embedder": {"spec": "minilm"}}))
        assert session.models["lm"]["spec"] == spec


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/b", "..", "x\\..\\y"])
def test_a_session_name_stays_in_the_sessions_folder(name, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path))
    with pytest.raises(Exception) as error:  # ParameterError: a bad argument (CLI exit 2)
        session_path(name)
    assert "sessions folder" in one_line(error)


CSV = 'question,references,corpus_id\nWhat?,"[{""content"": ""Alpha"", ""start_index"": 0, ""end_index"": 5}]",{cid}\n'


def test_an_embedded_question_set_cannot_write_outside_its_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file suffix '/../../evil.sh' is not one of .md, .txt"):
        parse_questions_csv(CSV.replace("{cid}", "c1"), {"c1": "Alpha beta."}, suffixes={"c1": "/../../evil.sh"})
    qset = parse_questions_csv(CSV.replace("{cid}", "../../escape"), {"../../escape": "Alpha beta."})
    names = zipfile.ZipFile(io.BytesIO(question_set_zip(qset))).namelist()
    assert names == ["questions.csv", "corpora/escape.md"]
    with pytest.raises(Exception, match="is not a file name"):  # ParameterError
        save_question_set(qset, tmp_path / "out" / "questions.csv")
    assert not (tmp_path / "escape.md").exists() and isinstance(qset, QuestionSet)


# --- the same through the CLI ------------------------------------------------------------------------------


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # In-process (run_main): what the CLI prints and its exit code, without a Python start and torch import a call.
    import os

    env = dict(env or {})
    data_dir = Path(env.pop("CHUNKLAB_DATA_DIR", os.environ["CHUNKLAB_DATA_DIR"]))
    return run_main(*args, data_dir=data_dir, **env)


def test_cli_refuses_a_session_naming_a_model_outside_the_data_dir(tmp_path: Path) -> None:
    session = tmp_path / "evil.json"
    session.write_text(_session({"lm": {"kind": "local", "spec": str(tmp_path / "elsewhere")}}), encoding="utf-8")
    (tmp_path / "elsewhere").mkdir()
    doc = tmp_path / "doc.txt"
    doc.write_text("Some text to chunk. " * 20, encoding="utf-8")
    proc = _cli("report", str(doc), "--session", str(session), "--no-quality", "--out", str(tmp_path / "r.html"),
                env={"CHUNKLAB_DATA_DIR": str(tmp_path / "data")})
    err = proc.stderr.decode().strip()
    assert proc.returncode == 1 and len(err.splitlines()) == 1, err
    assert "evil.json: the lm model" in err and "outside the data directory" in err
    assert not (tmp_path / "r.html").exists()


def test_cli_question_set_never_reads_a_corpus_outside_its_folder(tmp_path: Path) -> None:
    (tmp_path / "secret.md").write_text("Alpha secret.", encoding="utf-8")  # beside, not inside, corpora/
    (tmp_path / "set" / "corpora").mkdir(parents=True)
    csv_path = tmp_path / "set" / "questions.csv"
    csv_path.write_text(CSV.replace("{cid}", "../../secret"), encoding="utf-8")
    proc = _cli("questions", "check", "--questions", str(csv_path))
    err = proc.stderr.decode().strip()
    assert proc.returncode == 1 and len(err.splitlines()) == 1, err
    assert "no corpus file for corpus_id '../../secret'" in err


def test_cli_report_on_a_file_named_with_html_escapes_it(tmp_path: Path) -> None:
    doc = tmp_path / "<img src=x onerror=alert(1)>.txt"
    doc.write_text("مرحبا بالعالم. Some <b>text</b> to chunk here. " * 10, encoding="utf-8")
    out = tmp_path / "report.html"
    proc = _cli("report", str(doc), "--config", "recursive chunk_size=40", "--no-quality", "--out", str(out),
                env={"CHUNKLAB_DATA_DIR": str(tmp_path / "data")})
    assert proc.returncode == 0, proc.stderr.decode()
    html = out.read_text(encoding="utf-8")
    assert "<img src=x" not in html and "<b>text</b>" not in html
    assert "<title>Chunk Lab report: &lt;img src=x onerror=alert(1)&gt;.txt</title>" in html
