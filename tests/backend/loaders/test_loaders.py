"""Tests for backend.loaders: every format, every error, and the span invariants.

Fixtures are generated in ``tmp_path`` (reportlab for PDFs, python-docx for DOCX); nothing
is downloaded.
"""

from __future__ import annotations

import io
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backend.errors import (
    BinaryDataError,
    CorruptFileError,
    EmptyFileError,
    EncryptedPDFError,
    FileTooLargeError,
    InputError,
    NoTextLayerError,
    ParameterError,
    UnsupportedTypeError,
)
from backend.loaders import SUPPORTED_EXTENSIONS, load_bytes, load_document
from backend.loaders.invariants import document_problems
from backend.loaders.normalize import TextBuilder, normalize_text
from backend.text.document import Document
from backend.text.spans import Span

CHINESE = "我们今天去公园散步，天气非常好。你觉得呢？这是一个测试文本；包含全角标点！雨一直在下，下得不紧不慢。"
ENGLISH = "The quick brown fox jumps over the lazy dog. It was the best of days, and the fox was happy."


def checked(document: Document) -> Document:
    """Assert the loader invariants and return the document."""
    assert document_problems(document) == []
    for span in document.paragraphs:
        piece = span.slice(document.text)
        assert piece == piece.strip() and piece
    return document


def load(data: bytes, name: str, **kwargs: object) -> Document:
    """load_bytes plus the invariants."""
    return checked(load_bytes(data, name, **kwargs))  # type: ignore[arg-type]


def paragraphs(document: Document) -> list[str]:
    """The paragraph texts."""
    return [span.slice(document.text) for span in document.paragraphs]


# --- PDF fixtures --------------------------------------------------------------------------


def pdf_from_lines(pages: list[list[str]], **canvas_kwargs: object) -> bytes:
    """A PDF with one text line per entry, 14 pt apart, one list per page."""
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, **canvas_kwargs)  # type: ignore[arg-type]
    for lines in pages:
        y = 780
        for line in lines:
            pdf.drawString(72, y, line)
            y -= 14
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def pdf_from_story(story_factory: Callable[[], list]) -> bytes:
    """A PDF laid out by reportlab's Platypus from a list of flowables."""
    from reportlab.lib.pagesizes import A4
    from reportlab.platypus import SimpleDocTemplate

    buffer = io.BytesIO()
    SimpleDocTemplate(buffer, pagesize=A4).build(story_factory())
    return buffer.getvalue()


@pytest.fixture(scope="module")
def styles() -> Any:
    """reportlab's sample style sheet."""
    from reportlab.lib.styles import getSampleStyleSheet

    return getSampleStyleSheet()


# --- PDF -----------------------------------------------------------------------------------


def test_pdf_pages_have_spans_holding_their_text() -> None:
    data = pdf_from_lines([["Alpha page one."], ["Bravo page two."], ["Charlie page three."]])
    doc = load(data, "three.pdf")
    assert doc.kind == "pdf" and doc.encoding is None and doc.source == "three.pdf"
    assert doc.text == "Alpha page one.\n\nBravo page two.\n\nCharlie page three."
    assert [page.slice(doc.text) for page in doc.pages] == ["Alpha page one.", "Bravo page two.", "Charlie page three."]
    assert doc.page_of(doc.text.index("Bravo")) == 2


def test_pdf_blank_page_gets_an_empty_span() -> None:
    data = pdf_from_lines([["First page text."], [], ["Third page text."]])
    doc = load(data, "gap.pdf")
    assert len(doc.pages) == 3
    assert len(doc.pages[1]) == 0
    assert doc.pages[2].slice(doc.text) == "Third page text."
    assert doc.page_of(doc.text.index("Third")) == 3


def test_pdf_many_pages_with_wrapped_paragraphs(styles: Any) -> None:
    from reportlab.platypus import PageBreak, Paragraph

    body = "Sentence number {n} of page {p} talks about storage segments and replicas."
    texts = {p: " ".join(body.format(n=n, p=p) for n in range(8)) for p in range(1, 6)}

    def story() -> list:
        flow: list = []
        for p, text in texts.items():
            flow += [Paragraph(text, styles["BodyText"]), PageBreak()]
        return flow[:-1]

    doc = load(pdf_from_story(story), "long.pdf")
    assert len(doc.pages) == 5
    for page, (p, text) in zip(doc.pages, texts.items()):
        assert page.slice(doc.text) == text  # wrapped lines joined by single spaces
    assert paragraphs(doc) == list(texts.values())


def test_pdf_paragraphs_headings_bullets_and_code(styles: Any) -> None:
    from reportlab.platypus import ListFlowable, ListItem, Paragraph, Preformatted

    first = ("Kestrel stores objects in buckets and replicates them across nodes in different zones, "
             "so that losing one zone does not lose data. Writes need a majority of replicas.")
    second = "A short closing paragraph."

    def story() -> list:
        return [
            Paragraph("Storage concepts", styles["Heading1"]),
            Paragraph(first, styles["BodyText"]),
            Paragraph(second, styles["BodyText"]),
            ListFlowable([ListItem(Paragraph("first item", styles["BodyText"])),
                          ListItem(Paragraph("second item", styles["BodyText"]))], bulletType="bullet"),
            Preformatted("kestrel status\nkestrel node drain b2", styles["Code"]),
        ]

    doc = load(pdf_from_story(story), "structure.pdf")
    assert paragraphs(doc) == [
        "Storage concepts",
        first,
        second,
        "• first item",
        "• second item",
        "kestrel status\nkestrel node drain b2",  # monospaced lines keep their breaks
    ]


def test_pdf_short_lines_keep_hard_breaks_and_hyphenation_joins_words() -> None:
    lines = [
        "The committee agreed that the results were exam-",
        "ple of careful work by the Hewlett-",
        "Packard team and so on.",
    ]
    doc = load(pdf_from_lines([lines]), "hyphens.pdf")
    assert "example of careful work" in doc.text
    assert "Hewlett-Packard team" in doc.text
    assert "\ufffe" not in doc.text and "\x02" not in doc.text


def test_pdf_address_lines_stay_on_separate_lines() -> None:
    doc = load(pdf_from_lines([["Kestrel Labs", "12 Harrow Lane", "Springfield"]]), "address.pdf")
    assert doc.text == "Kestrel Labs\n12 Harrow Lane\nSpringfield"
    assert len(doc.paragraphs) == 1


def test_pdf_chinese_lines_join_without_spaces() -> None:
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.platypus import Paragraph

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    style = ParagraphStyle("zh", fontName="STSong-Light", fontSize=11, leading=16, wordWrap="CJK", spaceAfter=8)
    text = CHINESE * 4
    doc = load(pdf_from_story(lambda: [Paragraph(text, style), Paragraph(CHINESE, style)]), "zh.pdf")
    assert paragraphs(doc) == [text, CHINESE]
    assert doc.language == "zh"


def test_pdf_image_only_has_no_text_layer() -> None:
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer)
    pdf.rect(100, 100, 200, 300, fill=1)
    pdf.circle(300, 500, 50)
    pdf.showPage()
    pdf.save()
    with pytest.raises(NoTextLayerError, match="no extractable text; OCR is not supported") as error:
        load_bytes(buffer.getvalue(), "scan.pdf")
    assert "scan.pdf" in str(error.value)


def test_pdf_encrypted_needs_password() -> None:
    data = pdf_from_lines([["Secret text."]], encrypt="hunter2")
    with pytest.raises(EncryptedPDFError, match="'locked.pdf' is encrypted; remove the password"):
        load_bytes(data, "locked.pdf")


def test_pdf_with_owner_password_only_opens() -> None:
    from reportlab.lib.pdfencrypt import StandardEncryption

    data = pdf_from_lines([["Readable but restricted."]], encrypt=StandardEncryption("", ownerPassword="owner"))
    assert load(data, "restricted.pdf").text == "Readable but restricted."


def test_pdf_truncated_is_corrupt() -> None:
    data = pdf_from_lines([["Some text on page one."], ["More text on page two."]])
    with pytest.raises(CorruptFileError, match="cut.pdf"):
        load_bytes(data[: len(data) // 2], "cut.pdf")


def test_pdf_garbage_is_corrupt() -> None:
    with pytest.raises(CorruptFileError, match="not a PDF"):
        load_bytes(b"this is not a pdf at all", "fake.pdf")
    with pytest.raises(CorruptFileError, match="damaged"):
        load_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 8 + b"\n%%EOF\n", "broken.pdf")


def test_pdf_content_is_sniffed_whatever_the_extension() -> None:
    doc = load(pdf_from_lines([["Sniffed as a PDF."]]), "misnamed.txt")
    assert doc.kind == "pdf" and doc.text == "Sniffed as a PDF."


def test_pdf_loads_from_several_threads() -> None:
    data = pdf_from_lines([[f"Line {i} of page {p}." for i in range(20)] for p in range(5)])
    results: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(load_bytes(data, "threads.pdf").text)
        except BaseException as e:  # noqa: BLE001 - collected and re-raised by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(set(results)) == 1 and len(results) == 4


# --- DOCX ----------------------------------------------------------------------------------


def make_docx() -> bytes:
    """A .docx with a heading, paragraphs, a table and an empty paragraph."""
    import docx

    document = docx.Document()
    document.add_heading("Quarterly report", level=1)
    document.add_paragraph("Storage grew by 3.5 TB this quarter.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Zone"
    table.cell(0, 1).text = "Usage"
    table.cell(1, 0).text = "rack-a"
    table.cell(1, 1).text = "71%"
    document.add_paragraph("")
    document.add_paragraph("After the table.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def test_docx_paragraphs_and_tables_in_order() -> None:
    doc = load(make_docx(), "report.docx")
    assert doc.kind == "docx" and doc.encoding is None
    assert paragraphs(doc) == [
        "Quarterly report",
        "Storage grew by 3.5 TB this quarter.",
        "Zone\tUsage",
        "rack-a\t71%",
        "After the table.",
    ]
    assert doc.pages == (Span(0, len(doc.text)),)


def test_docx_truncated_or_not_a_zip_is_corrupt() -> None:
    data = make_docx()
    with pytest.raises(CorruptFileError, match="half.docx"):
        load_bytes(data[: len(data) // 2], "half.docx")
    with pytest.raises(CorruptFileError, match="plain.docx"):
        load_bytes(b"just some text, not a zip archive", "plain.docx")


def test_docx_zip_without_word_document_is_corrupt() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hello.txt", "not a word document")
    with pytest.raises(CorruptFileError, match="other.docx"):
        load_bytes(buffer.getvalue(), "other.docx")


def test_docx_that_expands_too_much_is_refused() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"\0" * 3_000_000)
    with pytest.raises(FileTooLargeError, match="expands"):
        load_bytes(buffer.getvalue(), "bomb.docx", max_bytes=100_000)


# --- HTML ----------------------------------------------------------------------------------

HOSTILE_HTML = """<!DOCTYPE html><html><head><title>Page title</title>
<style>body { color: red } .secret { display: none }</style>
<script>alert('x')</script><meta name="description" content="meta text"></head>
<body>
<h1>Main &amp; heading</h1>
<p>First <b>bold</b> and <i>italic</i>
   words,&nbsp;spread   over lines.<!-- a comment --> Tail text.</p>
<img src=x onerror=alert(1) alt="alt text">
<script type="text/javascript">document.write("injected")</script>
<noscript>Enable JavaScript</noscript><template><p>template text</p></template>
<div hidden>hidden div</div><span style="display:none">invisible span</span>
<ul><li>One</li><li>Two<br>lines</li></ul>
<pre>def f(x):
    return x + 1</pre>
<table><tr><th>Name</th><th>Size</th></tr><tr><td>a.txt</td><td>3 KB</td></tr></table>
<p>Caf&eacute; &#x4e2d;&#25991; &lt;tag&gt;</p>
</body></html>"""


def test_html_keeps_visible_text_only() -> None:
    doc = load(HOSTILE_HTML.encode("utf-8"), "page.html")
    assert doc.kind == "html" and doc.encoding == "utf-8"
    for hidden in ("alert", "injected", "color: red", "display", "Page title", "meta text", "alt text",
                   "onerror", "a comment", "Enable JavaScript", "template text", "hidden div", "invisible span",
                   "<script", "<img"):
        assert hidden not in doc.text, hidden
    assert paragraphs(doc) == [
        "Main & heading",
        "First bold and italic words,\xa0spread over lines. Tail text.",
        "One",
        "Two\nlines",
        "def f(x):\n    return x + 1",
        "Name\tSize\na.txt\t3 KB",
        "Café 中文 <tag>",
    ]


def test_html_with_only_a_script_is_empty() -> None:
    with pytest.raises(EmptyFileError, match="'script.html' contains no text"):
        load_bytes(b"<html><head><script>alert('x')</script></head><body> </body></html>", "script.html")


def test_html_declared_charset_is_used() -> None:
    markup = f'<html><head><meta charset="gb2312"></head><body><p>{CHINESE}</p></body></html>'
    doc = load(markup.encode("gb18030"), "zh.htm")
    assert doc.text == CHINESE and doc.encoding == "gb18030" and doc.language == "zh"
    latin = '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1"><p>Caf\xe9 cr\xe8me</p>'
    assert load(latin.encode("latin-1"), "fr.html").text == "Café crème"


def test_html_deep_nesting_does_not_recurse() -> None:
    markup = "<div>" * 1500 + "deep text" + "</div>" * 1500  # deeper than Python's recursion limit
    assert load(markup.encode(), "deep.html").text == "deep text"


# --- plain text and Markdown ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoded", "encoding"),
    [
        (CHINESE.encode("gb18030"), "gb18030"),
        (CHINESE.encode("gbk"), "gb18030"),
        (b"\xef\xbb\xbf" + CHINESE.encode("utf-8"), "utf-8-sig"),
        (CHINESE.encode("utf-8"), "utf-8"),
        (CHINESE.encode("utf-16"), "utf-16-le"),  # Python writes a little-endian BOM
        (b"\xfe\xff" + CHINESE.encode("utf-16-be"), "utf-16-be"),
        (CHINESE.encode("utf-16-le"), "utf-16-le"),  # no BOM, no NUL bytes
        (CHINESE.encode("utf-32"), "utf-32-le"),
    ],
)
def test_txt_chinese_encodings(encoded: bytes, encoding: str) -> None:
    doc = load(encoded, "chinese.txt")
    assert doc.text == CHINESE
    assert doc.encoding == encoding
    assert doc.language == "zh"


@pytest.mark.parametrize(
    ("encoded", "encoding"),
    [
        (ENGLISH.encode("utf-16-le"), "utf-16-le"),  # no BOM: found by the NUL bytes
        (ENGLISH.encode("utf-16-be"), "utf-16-be"),
        (ENGLISH.encode("utf-16"), "utf-16-le"),
        (ENGLISH.encode("ascii"), "utf-8"),
    ],
)
def test_txt_english_encodings(encoded: bytes, encoding: str) -> None:
    doc = load(encoded, "english.txt")
    assert doc.text == ENGLISH and doc.encoding == encoding and doc.language == "en"


def test_txt_latin1_falls_back_to_windows_1252() -> None:
    text = "Le café était très bon, et l'élève a mangé une crème brûlée. Grüße aus Köln!"
    doc = load(text.encode("latin-1"), "french.txt")
    assert doc.text == text and doc.encoding == "cp1252"
    assert load("Grüße".encode("latin-1"), "short.txt").text == "Grüße"  # valid GB18030 bytes, but not Chinese


def test_txt_cyrillic_code_page_is_recognised() -> None:
    text = "Привет, как дела? Это тестовый текст на русском языке, который нужно распознать правильно."
    doc = load(text.encode("cp1251"), "russian.txt")
    assert doc.text == text and doc.encoding == "cp1251" and doc.language == "ru"


def test_txt_truncated_utf8_stays_utf8() -> None:
    data = "Ein schöner Tag in Köln.".encode("utf-8") + "é".encode("utf-8")[:1]
    doc = load(data, "cut.txt")
    assert doc.encoding == "utf-8" and doc.text == "Ein schöner Tag in Köln.\ufffd"


@pytest.mark.parametrize(
    ("data", "what"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200), "a PNG image"),
        (b"\x7fELF\x02\x01\x01" + bytes(300) + b"\x3e\x00", "an ELF executable"),
        (b"text\x00\x00\x00\x00 with\x00\x00 NULs\x01\x02\x03" * 20, "binary data"),
        (bytes(range(256)) * 8, "binary data"),
    ],
)
def test_txt_binary_data_is_refused(data: bytes, what: str) -> None:
    with pytest.raises(BinaryDataError, match=f"'blob.txt' looks like {what}"):
        load_bytes(data, "blob.txt")


def test_txt_paragraphs_are_blank_line_blocks() -> None:
    data = b"  First paragraph\r\nstill first.  \r\n\r\n\r\n\r\nSecond\x0cparagraph.\x07\n\n\n"
    doc = load(data, "paras.txt")
    assert doc.text == "First paragraph\nstill first.\n\nSecond\nparagraph."
    assert paragraphs(doc) == ["First paragraph\nstill first.", "Second\nparagraph."]
    assert doc.pages == (Span(0, len(doc.text)),)


def test_markdown_keeps_its_source() -> None:
    source = "# Title\n\nSome *emphasis* and `code`.\n\n```python\nprint('hi')\n```\n"
    doc = load(source.encode(), "notes.markdown")
    assert doc.kind == "md" and doc.text == source.strip()
    assert load(source.encode(), "NOTES.MD").kind == "md"


def test_whitespace_only_text_is_empty() -> None:
    with pytest.raises(EmptyFileError, match="'blank.txt' contains no text"):
        load_bytes(b" \n\t\r\n \xe2\x80\x8b \n", "blank.txt")


# --- common checks -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["empty.txt", "empty.pdf", "empty.docx", "empty.html", "empty.md"])
def test_empty_file(name: str) -> None:
    with pytest.raises(EmptyFileError, match=rf"'{name}' is empty \(0 bytes\)"):
        load_bytes(b"", name)


def test_unsupported_type_lists_the_supported_ones() -> None:
    with pytest.raises(UnsupportedTypeError) as error:
        load_bytes(b"data", "archive.xyz")
    message = str(error.value)
    assert message.startswith("unsupported file type '.xyz'") and "archive.xyz" in message
    assert all(extension in message for extension in (".pdf", ".txt", ".md", ".html", ".docx"))
    with pytest.raises(UnsupportedTypeError, match="no extension"):
        load_bytes(b"data", "README")


def test_supported_extensions() -> None:
    assert {".pdf", ".txt", ".md", ".markdown", ".html", ".htm", ".docx"} <= set(SUPPORTED_EXTENSIONS)


def test_too_large_names_size_and_limit() -> None:
    with pytest.raises(FileTooLargeError, match=r"'big.txt' is 0.000954 MB, over the 0.000095 MB limit"):
        load_bytes(b"x" * 1000, "big.txt", max_bytes=100)


def test_limit_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CHUNKLAB_MAX_FILE_MB", "0.001")
    with pytest.raises(FileTooLargeError, match="over the 0.000999 MB limit"):
        load_bytes(b"x" * 2000, "env.txt")
    path = tmp_path / "env.txt"
    path.write_bytes(b"x" * 2000)
    with pytest.raises(FileTooLargeError):
        load_document(path)


def test_load_document_checks_size_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "huge.txt"
    with path.open("wb") as handle:
        handle.truncate(60 * 2**20)  # sparse: 60 MB on paper, nothing on disk

    def no_reading(*args: object, **kwargs: object) -> None:
        raise AssertionError("the file was opened")

    monkeypatch.setattr(Path, "open", no_reading)
    with pytest.raises(FileTooLargeError, match="'huge.txt' is 60.0 MB, over the 50.0 MB limit"):
        load_document(path)


def test_load_document_reads_files(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "story.txt"
    path.parent.mkdir()
    path.write_text(ENGLISH, encoding="utf-8")
    doc = checked(load_document(path))
    assert doc.source == "story.txt" and doc.text == ENGLISH
    assert checked(load_document(str(path))).text == ENGLISH
    with pytest.raises(InputError, match="missing.txt"):
        load_document(tmp_path / "missing.txt")
    with pytest.raises(InputError, match="folder.txt"):
        (tmp_path / "folder.txt").mkdir()
        load_document(tmp_path / "folder.txt")


def test_source_is_the_base_name() -> None:
    assert load(b"hello there, the text", "C:\\Users\\me\\notes.txt").source == "notes.txt"
    assert load(b"hello there, the text", "/tmp/x/notes.TXT").source == "notes.TXT"


def test_max_bytes_must_be_positive() -> None:
    with pytest.raises(ParameterError, match="max_bytes"):
        load_bytes(b"text", "a.txt", max_bytes=0)


# --- normalization -------------------------------------------------------------------------


def test_normalize_text_rules() -> None:
    raw = "\ufeff  Cafe\u0301\u200b  \r\nline\rtwo\x0bthree\x0cfour\x07\t \n\n\n\n\nend\u2029next  "
    assert normalize_text(raw) == "Café\nline\ntwo\nthree\nfour\n\nend\n\nnext"
    assert normalize_text(" \n\t ") == ""
    assert normalize_text("keep\ttabs and  inner  spaces") == "keep\ttabs and  inner  spaces"


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)) | st.sampled_from("\r\n\t \x0c\u200b\ufeff")))
def test_normalize_text_is_idempotent_and_clean(raw: str) -> None:
    once = normalize_text(raw)
    assert normalize_text(once) == once
    assert "\r" not in once and "\n\n\n" not in once and once == once.strip()
    assert all(line == line.rstrip() for line in once.split("\n"))


def test_text_builder_records_offsets_while_building() -> None:
    builder = TextBuilder()
    builder.start_page()
    builder.add_paragraph("  first  ")
    builder.add_paragraph("second\n\n\n   third")
    builder.end_page()
    builder.start_page()
    builder.end_page()
    builder.start_page()
    builder.add_paragraph("fourth")
    builder.end_page()
    doc = checked(builder.to_document(source="built.txt", kind="txt"))
    assert doc.text == "first\n\nsecond\n\n   third\n\nfourth"
    assert paragraphs(doc) == ["first", "second", "third", "fourth"]
    assert [page.slice(doc.text) for page in doc.pages] == ["first\n\nsecond\n\n   third", "", "fourth"]


def test_invariant_checker_catches_bad_spans() -> None:
    doc = Document(text="abc def", source="x", kind="txt", pages=(Span(0, 3),), paragraphs=(Span(0, 4),))
    problems = document_problems(doc)
    assert any("outside every page" in problem for problem in problems)
    assert any("surrounding whitespace" in problem for problem in problems)



def test_pdf_two_columns_are_read_as_columns() -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import BaseDocTemplate, Frame, PageTemplate, Paragraph

    texts = [
        f"Paragraph {n} explains how segment {n} is replicated to three zones, and why a quorum of two "
        f"replicas is enough to acknowledge a write of {n}.5 MB without waiting for the slowest disk."
        for n in range(1, 25)
    ]
    buffer = io.BytesIO()
    width, height = A4
    column = (width - 100) / 2
    document = BaseDocTemplate(buffer, pagesize=A4)
    document.addPageTemplates([PageTemplate(frames=[Frame(40, 40, column, height - 80),
                                                    Frame(60 + column, 40, column, height - 80)])])
    style = ParagraphStyle("body", fontName="Helvetica", fontSize=9, leading=11, spaceAfter=5)
    document.build([Paragraph(text, style) for text in texts])
    doc = load(buffer.getvalue(), "columns.pdf")
    assert len(doc.pages) == 1  # 24 paragraphs fill more than one column
    # The paragraph cut by the column break (mid-sentence, next column to the right) is joined.
    assert paragraphs(doc) == texts
