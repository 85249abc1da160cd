"""Text: the Document with exact spans, and its segmentation into sentences and paragraphs.

- ``spans``: :class:`Span`, a half-open character range of a text.
- ``document``: :class:`Document`, normalized text with page and paragraph spans.
- ``segment``: sentence and paragraph spans (English and Chinese).
- ``blingfire``: the sentence breaker wrapped by ``segment``.
- ``language``: language detection.
"""
