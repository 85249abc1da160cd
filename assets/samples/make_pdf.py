"""Render ``technical_kestrel.md`` as ``technical_kestrel.pdf`` with reportlab.

The PDF sample is the same text as the Markdown sample, laid out as a real document
(headings, wrapped paragraphs, bullet and numbered lists, a code block, page numbers), so
the two can be compared to see what PDF extraction changes. Only the small subset of
Markdown the sample uses is understood. The output is byte-for-byte reproducible
(reportlab's ``invariant`` mode fixes the dates and document id).

Run from the repository root::

    .venv/bin/python assets/samples/make_pdf.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from xml.sax.saxutils import escape

from reportlab import rl_config
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import cm
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import ListFlowable, ListItem, Paragraph, Preformatted, SimpleDocTemplate, Spacer

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "technical_kestrel.md"
TARGET = HERE / "technical_kestrel.pdf"


def inline(text: str) -> str:
    """Markdown inline markup (code, bold, italic) as reportlab paragraph markup."""
    parts = re.split(r"(`[^`]+`)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f'<font name="Courier">{escape(part[1:-1])}</font>')
            continue
        part = escape(part)
        part = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", part)
        part = re.sub(r"\*(.+?)\*", r"<i>\1</i>", part)
        out.append(part)
    return "".join(out)


def flowables(markdown: str) -> list:
    """Turn the sample's Markdown into reportlab flowables."""
    styles = getSampleStyleSheet()
    body = ParagraphStyle("Body", parent=styles["BodyText"], fontSize=10.5, leading=14, spaceAfter=6)
    code = ParagraphStyle("CodeBlock", parent=styles["Code"], fontSize=8.5, leading=10.5, leftIndent=12, spaceAfter=8)
    headings = {1: styles["Title"], 2: styles["Heading2"], 3: styles["Heading3"]}

    story: list = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if line.startswith("```"):
            block = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                block.append(lines[i])
                i += 1
            story.append(Preformatted("\n".join(block), code))
            i += 1
            continue
        heading = re.match(r"(#{1,3}) (.*)", line)
        if heading:
            story.append(Paragraph(inline(heading.group(2)), headings[len(heading.group(1))]))
            i += 1
            continue
        bullet = re.match(r"(- |\d+\. )", line)
        if bullet:
            numbered = bullet.group(1) != "- "
            items = []
            while i < len(lines) and re.match(r"(- |\d+\. )", lines[i]):
                text = re.sub(r"^(- |\d+\. )", "", lines[i])
                items.append(ListItem(Paragraph(inline(text), body)))
                i += 1
            story.append(
                ListFlowable(items, bulletType="1" if numbered else "bullet", start="1" if numbered else None, bulletFormat="%s." if numbered else None,
                             leftIndent=18, bulletFontSize=9)
            )
            story.append(Spacer(1, 4))
            continue
        paragraph = [line.strip()]
        i += 1
        while i < len(lines) and lines[i].strip() and not re.match(r"(#|```|- |\d+\. )", lines[i]):
            paragraph.append(lines[i].strip())
            i += 1
        story.append(Paragraph(inline(" ".join(paragraph)), body))
    return story


class NumberedCanvas(Canvas):
    """A canvas that draws the page footer last, so it comes after the body in the text layer."""

    def showPage(self) -> None:  # noqa: N802 (reportlab's name)
        self.saveState()
        self.setFont("Helvetica", 8)
        self.drawCentredString(A4[0] / 2, 1.2 * cm, f"Kestrel Operator Guide - page {self.getPageNumber()}")
        self.restoreState()
        super().showPage()


def build(target: Path = TARGET, source: Path = SOURCE) -> Path:
    """Render ``source`` (Markdown) as a PDF at ``target``.

    Args:
        target: Where to write the PDF.
        source: The Markdown file.

    Returns:
        ``target``.
    """
    rl_config.invariant = 1
    document = SimpleDocTemplate(
        str(target), pagesize=A4, title="Kestrel Object Store: Operator Guide", author="Chunk Lab samples",
        leftMargin=2.2 * cm, rightMargin=2.2 * cm, topMargin=2 * cm, bottomMargin=2 * cm,
    )
    document.build(flowables(source.read_text(encoding="utf-8")), canvasmaker=NumberedCanvas)
    return target


def main() -> int:
    """Build the sample PDF next to this script."""
    target = build()
    print(f"wrote {target} ({target.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
