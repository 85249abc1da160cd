"""HTML: the visible text of the body, in reading order.

lxml (libxml2's HTML parser) is used directly: it is fast on large pages, recovers from
the broken markup real pages have, and decodes entities; BeautifulSoup on top of it would
add a second tree and a slower walk for nothing this loader needs.

What counts as visible: text nodes of the body, outside ``<script>``, ``<style>``,
``<noscript>``, ``<template>``, ``<svg>``, ``<math>``, embedded objects and form widgets,
and outside elements marked ``hidden``, ``aria-hidden="true"`` or inline
``display:none`` / ``visibility:hidden``. Comments, attributes (``alt``, ``title``, event
handlers) and the whole ``<head>``, ``<title>`` included, are left out.

Layout: block elements (``p``, ``div``, ``li``, headings, ``blockquote``, ``section``…)
become paragraphs; ``<br>`` and table rows become line breaks, table cells are separated
by tabs, and a table is one paragraph; inline elements join their text with the
surrounding text; whitespace collapses as a browser would, except inside ``<pre>`` and
``<textarea>``, which keep their lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from backend.errors import EmptyFileError
from backend.loaders.encoding import declared_html_charset, decode_text
from backend.loaders.normalize import TextBuilder
from backend.text.document import Document

__all__ = ["load_html", "html_blocks"]

_SKIPPED = frozenset(
    "head title script style noscript template svg math iframe object embed applet canvas "
    "audio video picture source track map select datalist input option optgroup meta link base".split()
)
_BLOCKS = frozenset(
    "address article aside blockquote body caption center dd details dialog dir div dl dt "
    "fieldset figcaption figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr html legend li "
    "main menu nav ol p pre section summary table ul".split()
)
_PREFORMATTED = frozenset(("pre", "textarea", "listing", "plaintext", "xmp"))
_CELLS = frozenset(("td", "th"))
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
_HTML_SPACE = re.compile(r"[ \t\n\r\f]+")
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*>")
# lxml refuses strings with characters XML cannot hold; normalization would drop them anyway.
_XML_INCOMPATIBLE = dict.fromkeys([c for c in range(0x20) if c not in (0x09, 0x0A, 0x0D)] + [0xFFFE, 0xFFFF])
_SURROGATES = re.compile("[\ud800-\udfff]")


def _is_hidden(element: object) -> bool:
    """Whether an element is hidden by its attributes."""
    attrib = element.attrib  # type: ignore[attr-defined]
    if "hidden" in attrib or attrib.get("aria-hidden", "").strip().lower() == "true":
        return True
    return bool(_HIDDEN_STYLE.search(attrib.get("style", "")))


class _Collector:
    """Gathers text fragments into blocks while the tree is walked."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self._fragments: list[str] = []
        self._preformatted = 0  # depth of <pre>-like elements
        self._cells = 0  # depth of table cells: blocks inside a cell do not break the row

    def text(self, value: str | None) -> None:
        """Add a text node."""
        if value:
            self._fragments.append(value if self._preformatted else _HTML_SPACE.sub(" ", value))

    def start(self, tag: str) -> None:
        """Open an element."""
        if tag in _CELLS:
            if self._fragments and self._fragments[-1] != "\n":
                self._fragments.append("\t")
            self._cells += 1
        elif tag == "tr":
            if self._fragments:
                self._fragments.append("\n")
        elif tag == "br":
            self._fragments.append(" " if self._cells else "\n")
        elif tag in _BLOCKS or tag in _PREFORMATTED:
            self._break()
        if tag in _PREFORMATTED:
            self._preformatted += 1

    def end(self, tag: str) -> None:
        """Close an element."""
        if tag in _PREFORMATTED:
            self._break()
            self._preformatted -= 1
        elif tag in _CELLS:
            self._cells -= 1
        elif tag in _BLOCKS:
            self._break()

    def finish(self) -> list[str]:
        """The blocks, once the walk is over."""
        self._flush()
        return self.blocks

    def _break(self) -> None:
        """A block boundary: inside a table cell it is only a space."""
        if self._cells and not self._preformatted:
            self._fragments.append(" ")
        else:
            self._flush()

    def _flush(self) -> None:
        """Close the current block."""
        if not self._fragments:
            return
        block = "".join(self._fragments)
        self._fragments = []
        if not self._preformatted:
            # Spaces next to the structural breaks come from source indentation: drop them.
            block = re.sub(r" *([\n\t]) *", r"\1", block)
            block = re.sub(r" {2,}", " ", block)
        if block.strip():
            self.blocks.append(block)


def _walk(root: object, collector: _Collector) -> None:
    """Visit the tree iteratively (deeply nested pages must not hit the recursion limit)."""
    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        element, closing = stack.pop()
        tag = element.tag  # type: ignore[attr-defined]
        if closing:
            collector.end(tag)
            collector.text(element.tail)  # type: ignore[attr-defined]
            continue
        if not isinstance(tag, str):  # a comment or processing instruction: only its tail shows
            collector.text(element.tail)  # type: ignore[attr-defined]
            continue
        tag = tag.lower()
        if tag in _SKIPPED or _is_hidden(element):
            collector.text(element.tail)  # type: ignore[attr-defined]
            continue
        collector.start(tag)
        collector.text(element.text)  # type: ignore[attr-defined]
        stack.append((element, True))
        stack.extend((child, False) for child in reversed(element))  # type: ignore[call-overload]


def html_blocks(markup: str) -> Iterator[str]:
    """The visible text blocks of an HTML document, not yet normalized.

    Args:
        markup: The decoded HTML.

    Yields:
        One string per block (paragraph, heading, list item, table, preformatted block).
    """
    import lxml.html
    from lxml.etree import ParserError

    markup = _XML_DECLARATION.sub("", markup, count=1).translate(_XML_INCOMPATIBLE)
    markup = _SURROGATES.sub("", markup)
    if not markup.strip():
        return
    # huge_tree lifts libxml2's limits on nesting depth (256) and text node size (10 MB).
    parser = lxml.html.HTMLParser(huge_tree=True)
    try:
        root = lxml.html.document_fromstring(markup, parser=parser)
    except ParserError:  # "Document is empty": only comments or whitespace
        return
    collector = _Collector()
    _walk(root, collector)
    yield from collector.finish()


def load_html(data: bytes, name: str) -> Document:
    """Load an HTML file, keeping only its visible text.

    Args:
        data: The HTML bytes; the encoding comes from a BOM, a ``<meta charset>`` or detection.
        name: The file name, for the document and for error messages.

    Returns:
        The document, ``kind="html"``, one page; paragraphs follow the block elements.

    Raises:
        BinaryDataError: The bytes are not text.
        EmptyFileError: No visible text.
    """
    markup, encoding = decode_text(data, name, declared=declared_html_charset(data))
    builder = TextBuilder()
    for block in html_blocks(markup):
        builder.add_paragraph(block)
    if not builder.has_text:
        raise EmptyFileError(f"'{name}' contains no text")
    return builder.to_document(source=name, kind="html", encoding=encoding)
