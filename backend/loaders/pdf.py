"""PDF text extraction with pypdfium2 (Google's PDFium).

Why PDFium: it is the engine inside Chrome, so its text layer handles the odd fonts,
encodings and broken files found in the wild as well as anything available; it extracts
a 300-page report in about a second where pure-Python parsers (pypdf, pdfminer.six) take
several times longer; and its licence (Apache-2.0 / BSD-3-Clause, with pypdfium2 under the
same terms) is permissive, unlike PyMuPDF's AGPL.

PDFium gives the text of a page with ``"\r\n"`` at each line end, and replaces a hyphen that
ends a line with a ``"\ufffe"`` (or ``"\x02"``) marker, dropping the line break. A PDF has no
paragraphs, only positioned lines, so they are rebuilt from what PDFium reports for each
line: left and right edge, baseline, font size and whether the font is monospaced.
Pages are read one at a time; a page boundary is always a paragraph boundary.

* **Paragraph break** (a blank line) when the font size changes (headings); when the next
  line is further below than the page's usual leading (1.4 times or more) or jumps back
  up (a new text block); when the next line starts with a bullet or a list number; and
  when a line ending a sentence is short, i.e. the next line's first word would have fit
  after it, or is followed by an indented first line.
* **Hard line break** (``"\n"`` inside a paragraph) between two monospaced lines (code),
  and after a short line that does not end a sentence (addresses, verse, table rows).
* **Soft wrap** otherwise: the lines are joined with one space, or with nothing when a
  CJK character is on either side of the break (Chinese and Japanese use no spaces).
  A hyphenation marker joins the halves of the word; the hyphen is kept unless a letter
  precedes it and a lowercase letter follows ("exam-ple" -> "example", but
  "Hewlett-Packard").

"Short" is measured against the line's column: the 90th percentile of the right edges of
the lines on the page that overlap it horizontally, so a two-column page is read as two
columns (PDFium must give the columns in order; a paragraph that continues into the next
column is joined when the jump goes right and the sentence is unfinished). Known limits:
a paragraph that ends on a full line with no extra spacing or indent is merged with the
next one; a paragraph running across a page is split in two; running headers, footers
and page numbers stay in the text as short paragraphs; indentation inside code blocks is
lost (PDFium collapses leading spaces); tables come out as lines of cells.

PDFium is not thread-safe, and Streamlit serves each session on its own thread, so every
call into it holds one module-level lock.
"""

from __future__ import annotations

import ctypes
import re
import statistics
import threading
from dataclasses import dataclass

from backend.errors import CorruptFileError, EmptyFileError, EncryptedPDFError, NoTextLayerError
from backend.loaders.normalize import TextBuilder
from backend.text.document import Document

__all__ = ["load_pdf", "PDF_MAGIC"]

PDF_MAGIC = b"%PDF-"
# PDF readers accept the header anywhere in the first 1 KiB and the %%EOF marker anywhere
# near the end (Acrobat: the last 1 KiB; we allow 2 KiB); without it the file was cut short.
_HEADER_WINDOW = 1024
_TRAILER_WINDOW = 2048

_PDFIUM_LOCK = threading.Lock()

_HYPHEN_MARKERS = "\ufffe\x02"
_SOFT_HYPHEN = "\u00ad"
_LINE = re.compile(r"([^\r\n\ufffe\x02]*)(\r\n|\r|\n|[\ufffe\x02](?:\r\n|\r|\n)?|$)")
# Bullets and list numbers ("1.", "2)", "a)", "(iv)"); not em dashes or "A.", which start
# wrapped lines of prose too often.
_BULLET = re.compile(r"(?:[•◦▪▫‣⁃●○■□►▸➢✓✔\-–*·]|\d{1,3}[.)]|[a-zA-Z]\)|\(\w{1,3}\))(?=\s)")
_CLOSERS = "\"'”’»)]}」』）》〕】*_"  # "*" and "_": Markdown emphasis left in the text
_SENTENCE_END = frozenset(".!?…。！？．")

_FIXED_PITCH_FLAG = 1  # PDF font descriptor flag bit 1
_MONOSPACE_NAME = re.compile(r"courier|mono|consol|menlo|code|fixed|typewriter", re.I)

_PARAGRAPH = "\n\n"
_HARD_BREAK = "\n"

_PITCH_FACTOR = 1.4  # a gap this many times the usual leading ends a paragraph
_SIZE_CHANGE = 0.08  # relative font-size change that marks a heading
_MIN_COLUMN_LINES = 5  # fewer lines than this in a column: use its extreme edges and the page width
_SPACE_EM = 0.28  # width of a space, in font sizes (Helvetica's is 0.278)
_INDENT_EM = 0.8  # a first-line indent of at least this many font sizes starts a paragraph


@dataclass(frozen=True, slots=True)
class _Line:
    """One physical line of a page, with its geometry when PDFium could give it."""

    text: str
    hyphenated: bool
    left: float | None = None
    right: float | None = None
    baseline: float | None = None
    size: float | None = None
    first_word_width: float | None = None
    monospace: bool = False

    @property
    def measured(self) -> bool:
        """Whether the geometry is known."""
        return self.left is not None


def _is_cjk(ch: str) -> bool:
    """Han, kana, Hangul, CJK punctuation or full-width forms."""
    code = ord(ch)
    return 0x2E80 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF or 0xFF00 <= code <= 0xFFEF


class _PageGeometry:
    """Reads character positions from a PDFium text page through the raw API (fast)."""

    def __init__(self, textpage_raw: object) -> None:
        from pypdfium2 import raw as pdfium_c

        self._c = pdfium_c
        self._page = textpage_raw
        self._l, self._r, self._b, self._t = (ctypes.c_double() for _ in range(4))
        self._x, self._y = ctypes.c_double(), ctypes.c_double()
        self._flags = ctypes.c_int()
        # Pointers made once: building them per call is a measurable share of a long PDF.
        self._box_out = tuple(ctypes.pointer(v) for v in (self._l, self._r, self._b, self._t))
        self._origin_out = (ctypes.pointer(self._x), ctypes.pointer(self._y))
        self._flags_out = ctypes.pointer(self._flags)
        self._name = ctypes.create_string_buffer(64)

    def char_index(self, text: str, text_index: int) -> int | None:
        """The PDFium character index behind ``text[text_index]``, checked by its code point."""
        index = self._c.FPDFText_GetCharIndexFromTextIndex(self._page, text_index)
        if index < 0 or self._c.FPDFText_GetUnicode(self._page, index) != ord(text[text_index]):
            return None
        return index

    def box(self, index: int) -> tuple[float, float] | None:
        """Left and right edge of a character."""
        ok = self._c.FPDFText_GetCharBox(self._page, index, *self._box_out)
        return (self._l.value, self._r.value) if ok else None

    def origin_y(self, index: int) -> float | None:
        """The baseline of a character."""
        ok = self._c.FPDFText_GetCharOrigin(self._page, index, *self._origin_out)
        return self._y.value if ok else None

    def font_size(self, index: int) -> float:
        """The font size of a character, in points."""
        return float(self._c.FPDFText_GetFontSize(self._page, index))

    def is_monospace(self, index: int) -> bool:
        """Whether a character's font is fixed-pitch (by its flags or its name)."""
        needed = self._c.FPDFText_GetFontInfo(self._page, index, self._name, len(self._name), self._flags_out)
        if needed > len(self._name):
            self._name = ctypes.create_string_buffer(needed)
            self._c.FPDFText_GetFontInfo(self._page, index, self._name, needed, self._flags_out)
        if self._flags.value & _FIXED_PITCH_FLAG:
            return True
        return bool(_MONOSPACE_NAME.search(self._name.value.decode("latin-1")))


def _measure(geometry: _PageGeometry, page_text: str, start: int, end: int, hyphenated: bool) -> _Line:
    """Build a :class:`_Line` for ``page_text[start:end]``, with geometry when it is available."""
    raw = page_text[start:end]
    stripped = raw.strip()
    if stripped.endswith(_SOFT_HYPHEN):  # a soft hyphen drawn as a glyph at the line end
        hyphenated = True
        raw = raw.rstrip()[:-1]
        stripped = raw.strip()
    if not stripped:
        return _Line("", hyphenated)
    first = start + (len(raw) - len(raw.lstrip()))
    last = start + len(raw.rstrip()) - 1
    space = re.search(r"\s", page_text[first : last + 1])
    if _is_cjk(page_text[first]):
        word_last = first
    else:
        word_last = first + space.start() - 1 if space else last

    middle = (first + last) // 2
    indices = [geometry.char_index(page_text, i) for i in (first, last, word_last, middle)]
    if None in indices:
        return _Line(stripped, hyphenated)
    first_index, last_index, word_index, middle_index = indices  # type: ignore[misc]
    first_box, last_box, word_box = geometry.box(first_index), geometry.box(last_index), geometry.box(word_index)
    baseline = geometry.origin_y(first_index)
    if first_box is None or last_box is None or word_box is None or baseline is None:
        return _Line(stripped, hyphenated)
    # The median of three samples, so that a bullet or a footnote mark does not set the size.
    size = statistics.median(geometry.font_size(i) for i in (first_index, middle_index, last_index))
    return _Line(
        text=stripped,
        hyphenated=hyphenated,
        left=first_box[0],
        right=last_box[1],
        baseline=baseline,
        size=size or None,
        first_word_width=max(0.0, word_box[1] - first_box[0]),
        monospace=geometry.is_monospace(first_index) and geometry.is_monospace(last_index),
    )


def _split_lines(page_text: str, geometry: _PageGeometry) -> list[_Line]:
    """Cut PDFium's page text into physical lines, noting which end in a hyphenation marker."""
    lines: list[_Line] = []
    position = 0
    while position < len(page_text):
        match = _LINE.match(page_text, position)
        if match is None or match.end() == position:  # cannot happen with this pattern; stay safe
            break
        terminator = match.group(2)
        hyphenated = bool(terminator) and terminator[0] in _HYPHEN_MARKERS
        lines.append(_measure(geometry, page_text, match.start(1), match.end(1), hyphenated))
        position = match.end()
    return lines


@dataclass(frozen=True, slots=True)
class _PageLayout:
    """Page-wide measures the line decisions compare against."""

    leading: float | None  # usual baseline distance divided by font size
    column_left: tuple[float, ...]  # per line: left edge of its text column
    column_right: tuple[float, ...]  # per line: right edge of its text column


def _quantile(values: list[float], q: float) -> float:
    """A simple nearest-rank quantile of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _column_of(lines: list[_Line], page_width: float | None) -> tuple[float, float]:
    """Left and right edge of the column formed by ``lines``.

    Quantiles, so that a few wide lines (a title across two columns) do not stretch it;
    with too few lines to tell, margins as wide as the left one are assumed.
    """
    if len(lines) >= _MIN_COLUMN_LINES:
        return _quantile([o.left for o in lines], 0.1), _quantile([o.right for o in lines], 0.9)  # type: ignore[misc]
    left = min(o.left for o in lines)  # type: ignore[type-var]
    right = max(o.right for o in lines)  # type: ignore[type-var]
    if page_width:
        right = max(right, page_width - left)
    return left, right


def _page_layout(lines: list[_Line], page_width: float | None) -> _PageLayout:
    """Measure the usual leading and, for each line, the column it sits in."""
    leadings = []
    for a, b in zip(lines, lines[1:]):
        if a.measured and b.measured and a.size and b.size and abs(a.size - b.size) < 0.5:
            pitch = a.baseline - b.baseline  # type: ignore[operator]
            if pitch > 0:
                leadings.append(pitch / a.size)
    # The lower quartile: paragraph gaps are the minority of line-to-line steps.
    leading = _quantile(leadings, 0.25) if len(leadings) >= 2 else None

    measured = [line for line in lines if line.measured]
    lefts: list[float] = []
    rights: list[float] = []
    if not measured:
        return _PageLayout(leading, (0.0,) * len(lines), (0.0,) * len(lines))
    # Usually every line overlaps every other (one column): measure that column once.
    innermost_right = min(o.right for o in measured)  # type: ignore[type-var]
    outermost_left = max(o.left for o in measured)  # type: ignore[type-var]
    whole_page = _column_of(measured, page_width)
    for line in lines:
        if not line.measured:
            lefts.append(0.0)
            rights.append(0.0)
            continue
        if line.left < innermost_right and line.right > outermost_left:  # type: ignore[operator]
            left, right = whole_page
        else:
            # The lines that share horizontal space with this one form its column.
            overlapping = [o for o in measured if o.left < line.right and o.right > line.left]  # type: ignore[operator]
            left, right = _column_of(overlapping, page_width)
        lefts.append(left)
        rights.append(right)
    return _PageLayout(leading, tuple(lefts), tuple(rights))


def _ends_sentence(text: str) -> bool:
    """Whether a line ends with sentence-final punctuation (closing quotes and brackets aside)."""
    stripped = text.rstrip(_CLOSERS)
    return bool(stripped) and stripped[-1] in _SENTENCE_END


def _soft_join(a: _Line, b: _Line) -> str:
    """The separator for two lines of the same paragraph."""
    if a.hyphenated:
        keep_hyphen = not (a.text[-1:].isalpha() and b.text[:1].islower())
        return "-" if keep_hyphen else ""
    if _is_cjk(a.text[-1]) or _is_cjk(b.text[0]):
        return ""
    return " "


def _separator(lines: list[_Line], i: int, layout: _PageLayout, in_list_item: bool) -> str:
    """What goes between line ``i`` and line ``i + 1``: a paragraph break, a line break or a join.

    ``in_list_item`` says whether the paragraph being built started with a bullet: its
    continuation lines are indented without starting new paragraphs.
    """
    a, b = lines[i], lines[i + 1]
    if a.hyphenated:
        return _soft_join(a, b)
    if not (a.measured and b.measured):
        return _PARAGRAPH if _BULLET.match(b.text) else _soft_join(a, b)
    size = a.size or b.size or 10.0
    if a.size and b.size and abs(a.size - b.size) > _SIZE_CHANGE * min(a.size, b.size):
        return _PARAGRAPH
    step = (a.baseline - b.baseline) / size  # type: ignore[operator]
    ends_sentence = _ends_sentence(a.text)
    if step < -1.0:  # the next line is higher up: the next column, or a separate text block
        next_column = b.left >= a.right  # type: ignore[operator]
        return _soft_join(a, b) if next_column and not ends_sentence else _PARAGRAPH
    if layout.leading is not None and step > _PITCH_FACTOR * layout.leading:
        return _PARAGRAPH
    if a.monospace and b.monospace:  # code keeps its lines
        return _HARD_BREAK
    if _BULLET.match(b.text):
        return _PARAGRAPH
    would_fit = a.right + _SPACE_EM * size + b.first_word_width <= layout.column_right[i] + 0.1 * size  # type: ignore[operator]
    if would_fit:
        return _PARAGRAPH if ends_sentence else _HARD_BREAK
    indent = _INDENT_EM * size
    if ends_sentence and b.left > layout.column_left[i + 1] + indent:  # type: ignore[operator]
        # An indented first line after a sentence end; when the line before is indented too,
        # it was a one-line paragraph (or, in a list item, a continuation line).
        a_indented = a.left > layout.column_left[i] + indent  # type: ignore[operator]
        if b.left > a.left + indent or (a_indented and not in_list_item):  # type: ignore[operator]
            return _PARAGRAPH
    return _soft_join(a, b)


def page_paragraphs(page_text: str, geometry: _PageGeometry, page_width: float | None = None) -> list[str]:
    """Rebuild the paragraphs of one page from PDFium's text and character geometry.

    Args:
        page_text: The page text as PDFium returns it (``"\\r\\n"`` line ends, hyphen markers).
        geometry: Access to the page's character positions.
        page_width: The page width in points, used when a column has too few lines to measure.

    Returns:
        The paragraphs, not yet normalized; a paragraph may contain hard line breaks.
    """
    lines = _split_lines(page_text, geometry)
    layout = _page_layout(lines, page_width)
    paragraphs: list[str] = []
    current: list[str] = []
    in_list_item = False
    for i, line in enumerate(lines):
        if not line.text:  # a blank line is a paragraph break
            if current:
                paragraphs.append("".join(current))
                current = []
            continue
        if current:
            separator = _separator(lines, i - 1, layout, in_list_item)
            if separator == _PARAGRAPH:
                paragraphs.append("".join(current))
                current = []
            else:
                current.append(separator)
        if not current:
            in_list_item = bool(_BULLET.match(line.text))
        current.append(line.text)
    if current:
        paragraphs.append("".join(current))
    return paragraphs


def _has_trailer(data: bytes) -> bool:
    """Whether the file ends with a ``%%EOF`` marker, as a complete PDF does."""
    return b"%%EOF" in data[-_TRAILER_WINDOW:]


def load_pdf(data: bytes, name: str) -> Document:
    """Extract the text layer of a PDF.

    Pages are joined with a blank line, so a page boundary is also a paragraph boundary,
    and ``Document.pages`` holds one span per page (an empty span for a page without text).

    Args:
        data: The PDF bytes.
        name: The file name, for the document and for error messages.

    Returns:
        The document, ``kind="pdf"``.

    Raises:
        CorruptFileError: The file is not a PDF, or it is damaged or truncated.
        EncryptedPDFError: The PDF needs a password.
        EmptyFileError: The PDF has no pages.
        NoTextLayerError: No page has extractable text (a scan).
    """
    import pypdfium2 as pdfium
    from pypdfium2 import raw as pdfium_c

    if PDF_MAGIC not in data[:_HEADER_WINDOW]:
        raise CorruptFileError(f"'{name}' is not a PDF (no %PDF- header)")
    if not _has_trailer(data):
        # "%%EOF" is the marker as PDFs spell it (two percent signs), not a %-formatting escape.
        raise CorruptFileError(
            f"'{name}' is truncated: it lacks the end-of-file marker every complete PDF ends with "
            '("%%EOF"); upload the complete file'
        )

    builder = TextBuilder()
    with _PDFIUM_LOCK:
        try:
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as e:
            if e.err_code in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
                raise EncryptedPDFError(f"'{name}' is encrypted; remove the password and upload again") from e
            if e.err_code == pdfium_c.FPDF_ERR_SUCCESS:
                raise EmptyFileError(f"'{name}' has no pages") from e
            raise CorruptFileError(f"'{name}' is damaged and cannot be read as a PDF ({e})") from e
        try:
            for index in range(len(pdf)):
                builder.start_page()
                for paragraph in _read_page(pdf, index, name):
                    builder.add_paragraph(paragraph)
                builder.end_page()
        finally:
            pdf.close()
    if not builder.has_text:
        raise NoTextLayerError(f"'{name}' has no extractable text; OCR is not supported")
    return builder.to_document(source=name, kind="pdf")


def _read_page(pdf: object, index: int, name: str) -> list[str]:
    """The raw paragraphs of page ``index`` (the caller holds the PDFium lock)."""
    import pypdfium2 as pdfium

    try:
        page = pdf[index]  # type: ignore[index]
    except pdfium.PdfiumError as e:
        raise CorruptFileError(f"'{name}' is damaged: page {index + 1} cannot be read ({e})") from e
    try:
        textpage = page.get_textpage()
        try:
            page_text = textpage.get_text_range()
            if not page_text.strip():
                return []
            return page_paragraphs(page_text, _PageGeometry(textpage.raw), page.get_width())
        finally:
            textpage.close()
    except pdfium.PdfiumError as e:
        raise CorruptFileError(f"'{name}' is damaged: the text of page {index + 1} cannot be read ({e})") from e
    finally:
        page.close()
