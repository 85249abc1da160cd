"""Text: the Document with exact spans, and its segmentation into sentences and paragraphs.

- ``document``: :class:`Document` and :class:`Span`, normalized text with page and paragraph spans.
- ``segment``: sentence and paragraph spans (English and Chinese).
- ``blingfire``: the sentence breaker wrapped by ``segment``.
- ``language``: language detection.
"""
