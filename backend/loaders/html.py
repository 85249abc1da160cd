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


def _is_hidden(attrib: dict[str, str]) -> bool:
    """Whether an element is hidden by its attributes."""
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


class _Target:
    """lxml parser target: feeds the collector from parse events, never building a tree.

    A tree would cap the nesting depth (libxml2 stops at 2048 levels and silently drops
    the rest of the page) and cost memory; the events come in document order, so a
    skipped element is simply everything between its start and its matching end.
    """

    def __init__(self, collector: _Collector) -> None:
        self._collector = collector
        self._skipped = 0  # depth inside a skipped or hidden element

    def start(self, tag: object, attrib: dict[str, str]) -> None:
        """An element opens."""
        if self._skipped:
            self._skipped += 1
            return
        name = tag.lower() if isinstance(tag, str) else ""
        if name in _SKIPPED or _is_hidden(attrib):
            self._skipped = 1
            return
        self._collector.start(name)

    def end(self, tag: object) -> None:
        """An element closes (libxml2 reports implied and void ends too)."""
        if self._skipped:
            self._skipped -= 1
            return
        self._collector.end(tag.lower() if isinstance(tag, str) else "")

    def data(self, value: str) -> None:
        """A text node (comments and processing instructions never get here)."""
        if not self._skipped:
            self._collector.text(value)

    def close(self) -> list[str]:
        """The blocks, once the parse is over."""
        return self._collector.finish()


def html_blocks(markup: str) -> Iterator[str]:
    """The visible text blocks of an HTML document, not yet normalized.

    Args:
        markup: The decoded HTML.

    Yields:
        One string per block (paragraph, heading, list item, table, preformatted block).
    """
    from lxml import etree

    markup = _XML_DECLARATION.sub("", markup, count=1).translate(_XML_INCOMPATIBLE)
    markup = _SURROGATES.sub("", markup)
    if not markup.strip():
        return
    # huge_tree lifts libxml2's limit on the size of a text node (10 MB).
    parser = etree.HTMLParser(target=_Target(_Collector()), huge_tree=True)
    yield from etree.fromstring(markup, parser=parser)


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
