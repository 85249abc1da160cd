"""Encoding detection for text formats (plain text, Markdown, HTML).

The order is explicit and deterministic, because the result is shown to the user and
recorded in ``Document.encoding``:

1. a byte-order mark (UTF-8, UTF-16 LE/BE, UTF-32 LE/BE);
2. magic numbers of binary formats (PNG, JPEG, ZIP, ELF, …): refused;
3. UTF-32/UTF-16 without a BOM, recognised by where mostly-ASCII text leaves its NUL
   bytes, or, for CJK text (which has none), by a UTF-16 reading that is all CJK
   characters with ideographic punctuation;
4. too many NUL or control bytes: refused as binary;
5. the charset an HTML page declares in ``<meta>``;
6. strict UTF-8 (a character cut off at the very end is tolerated), or UTF-8 with a few
   invalid bytes (replaced by U+FFFD) when most of its multi-byte characters are valid;
7. GB18030 (which covers GBK and GB2312) when the decoded text reads as Chinese;
8. Windows-1252, or Latin-1 for the few bytes Windows-1252 leaves undefined.

charset-normalizer (deterministic for a given input) is consulted only where a fixed rule
cannot decide, and only among a few candidates: text that decodes as GB18030 with enough
non-ASCII bytes to judge (EUC-KR, EUC-JP, Shift_JIS and Big5 bytes are often valid
GB18030 too), and single-byte text whose Windows-1252 reading is mostly accented letters
(Cyrillic, Greek or Big5 read as Windows-1252). It is not asked about ordinary Latin text,
where it guesses Baltic or Central European code pages for short French or German.
"""

from __future__ import annotations

import codecs
import re
import unicodedata

from charset_normalizer import from_bytes

from backend.errors import BinaryDataError

__all__ = ["decode_text", "sniff_binary", "declared_html_charset"]

_SAMPLE_BYTES = 8192
_SAMPLE_CHARS = 65536

_BOMS: tuple[tuple[bytes, str, str], ...] = (
    # UTF-32 first: its little-endian BOM starts with UTF-16's.
    (codecs.BOM_UTF32_LE, "utf-32-le", "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8", "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "utf-16-be"),
)

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"\x7fELF", "an ELF executable"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"\x1f\x8b", "gzip data"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Office document"),
    (b"%PDF-", "a PDF"),
    (b"\x00\x00\x01\x00", "an icon"),
    (b"\xca\xfe\xba\xbe", "a Mach-O or Java class file"),
    (b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"wOFF", "a web font"),
    (b"\x00asm", "WebAssembly"),
)

# Control bytes that never occur in text (tab, LF, VT, FF, CR and ESC can).
_CONTROL_BYTES = bytes(b for b in range(0x20) if b not in b"\t\n\x0b\x0c\r\x1b")
_MAX_NUL_RATIO = 0.01
_MAX_CONTROL_RATIO = 0.05


def _known_binary_format(data: bytes) -> str | None:
    """The binary format ``data`` starts with the magic number of, if any."""
    for magic, what in _MAGIC:
        if data.startswith(magic):
            return what
    return None


def sniff_binary(data: bytes) -> str | None:
    """Say what binary data looks like, or ``None`` if it could be text.

    Args:
        data: The file's bytes (only the first 8 KiB are examined).

    Returns:
        A short description such as ``"a PNG image"`` or ``"binary data"``, or ``None``.
    """
    what = _known_binary_format(data)
    if what is not None:
        return what
    sample = data[:_SAMPLE_BYTES]
    if not sample:
        return None
    if sample.count(0) / len(sample) > _MAX_NUL_RATIO:
        return "binary data"
    controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    if controls / len(sample) > _MAX_CONTROL_RATIO:
        return "binary data"
    return None


def _wide_encoding_without_bom(data: bytes) -> str | None:
    """Recognise BOM-less UTF-32/UTF-16 by the NUL bytes that mostly-ASCII text leaves."""
    sample = data[: _SAMPLE_BYTES - _SAMPLE_BYTES % 4]
    if len(sample) < 4:
        return None

    def nul_ratio(offset: int, step: int) -> float:
        column = sample[offset::step]
        return column.count(0) / len(column)

    if len(data) % 4 == 0:
        quads = [nul_ratio(i, 4) for i in range(4)]
        if min(quads[1:]) > 0.9 and quads[0] < 0.1:
            return "utf-32-le"
        if min(quads[:3]) > 0.9 and quads[3] < 0.1:
            return "utf-32-be"
    even, odd = nul_ratio(0, 2), nul_ratio(1, 2)
    if odd > 0.3 and even < 0.05:
        return "utf-16-le"
    if even > 0.3 and odd < 0.05:
        return "utf-16-be"
    return None


def _is_cjk(ch: str) -> bool:
    """Han, kana, bopomofo, CJK punctuation or full-width forms."""
    code = ord(ch)
    return (
        0x2E80 <= code <= 0x9FFF  # radicals, CJK punctuation, kana, bopomofo, Han (incl. ext. A)
        or 0xF900 <= code <= 0xFAFF  # compatibility ideographs
        or 0xFE30 <= code <= 0xFE4F  # CJK compatibility forms
        or 0xFF00 <= code <= 0xFFEF  # full-width and half-width forms
        or 0x20000 <= code <= 0x3FFFF  # supplementary ideographs
    )


_GENERAL_PUNCTUATION = set("“”‘’—–…·•、")


def _reads_as_chinese(text: str) -> bool:
    """Whether a GB18030 decoding looks like real CJK text rather than misread Latin-1.

    Latin-1 text decodes as GB18030 only when every accented letter pairs with the next
    byte, which turns it into a lone ideograph wedged between ASCII letters ("Köln" ->
    "K鰈n"); real Chinese has its characters in runs.
    """
    sample = text[:_SAMPLE_CHARS]
    wide = [i for i, ch in enumerate(sample) if ord(ch) > 0x7F]
    if not wide:
        return False
    cjk = [i for i in wide if _is_cjk(sample[i])]
    other = sum(1 for i in wide if not _is_cjk(sample[i]) and sample[i] not in _GENERAL_PUNCTUATION)
    if not cjk or other > 0.1 * len(wide):
        return False

    def ascii_alnum(i: int) -> bool:
        return 0 <= i < len(sample) and sample[i].isascii() and sample[i].isalnum()

    wedged = sum(1 for i in cjk if ascii_alnum(i - 1) and ascii_alnum(i + 1))
    return wedged <= 0.2 * len(cjk)


def _reads_as_cjk_utf16(text: str) -> bool:
    """Whether a UTF-16 decoding of non-UTF-8 bytes is CJK text (which has no NUL bytes to see)."""
    sample = text[:_SAMPLE_CHARS]
    if not sample:
        return False
    cjk = sum(1 for ch in sample if _is_cjk(ch))
    plain = sum(1 for ch in sample if (ch.isascii() and (ch.isprintable() or ch in "\t\n\r")))
    punct = sum(1 for ch in sample if ch in _GENERAL_PUNCTUATION)
    # Real CJK prose has ideographic punctuation; Shift_JIS or GBK bytes read as UTF-16 do not.
    ideographic_punct = sum(1 for ch in sample if "\u3000" <= ch <= "\u303f" or "\uff01" <= ch <= "\uff1f")
    return (
        cjk >= 0.5 * len(sample)
        and cjk + plain + punct == len(sample)
        and ideographic_punct >= 0.01 * len(sample)
    )


def _guess_with_charset_normalizer(data: bytes, candidates: list[str] | None = None) -> str | None:
    """charset-normalizer's best guess (a Python codec name), or ``None``."""
    best = from_bytes(data[: 4 * _SAMPLE_CHARS], cp_isolation=candidates).best()
    if best is None:
        return None
    return codecs.lookup(best.encoding).name


def _try_decode(data: bytes, encoding: str) -> str | None:
    """``data`` decoded strictly, or ``None``."""
    try:
        return data.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        return None


def _non_ascii_letter_ratio(text: str) -> float:
    """The share of letters that are not ASCII."""
    letters = [ch for ch in text[:_SAMPLE_CHARS] if ch.isalpha()]
    if not letters:
        return 0.0
    return sum(1 for ch in letters if not ch.isascii()) / len(letters)


def _check_decoded(text: str, name: str) -> None:
    """Reject a decoding full of control characters or replacement marks."""
    sample = text[:_SAMPLE_CHARS]
    if not sample:
        return
    bad = sum(
        1
        for ch in sample
        if ch == "\ufffd" or (unicodedata.category(ch) == "Cc" and ch not in "\t\n\x0b\x0c\r\x1b")
    )
    if bad / len(sample) > _MAX_CONTROL_RATIO:
        raise BinaryDataError(f"'{name}' looks like binary data, not text")


_UTF8_TRUNCATED = "unexpected end of data"
# UTF-8 with invalid bytes is still read as UTF-8 when at least this many valid multi-byte
# characters come per invalid byte: other encodings almost never form valid sequences
# (Windows-1252 accents never do, GBK pairs about one time in twelve).
_MIN_VALID_PER_INVALID_UTF8 = 3
_MIN_EVIDENCE_BYTES = 64
_HIGH_BYTES = bytes(range(0x80, 0x100))
_CJK_CANDIDATES = ["gb18030", "big5", "shift_jis", "euc_jp", "euc_kr"]
_SINGLE_BYTE_CANDIDATES = [
    "cp1252", "cp1250", "cp1251", "cp1253", "cp1254", "cp1255", "cp1256", "cp1257",
    "koi8_r", "cp866", "iso8859_5", "iso8859_7", "cp874",
]


def _mostly_utf8(data: bytes) -> bool:
    """Whether bytes that are not strict UTF-8 are UTF-8 with a few invalid bytes."""
    sample = data[: 4 * _SAMPLE_CHARS].decode("utf-8", errors="replace")
    invalid = sample.count("\ufffd")
    valid = len(sample) - len(sample.encode("ascii", errors="ignore")) - invalid
    return valid >= _MIN_VALID_PER_INVALID_UTF8 * max(invalid, 1)


def decode_text(data: bytes, name: str, declared: str | None = None) -> tuple[str, str]:
    """Decode a text file's bytes.

    Args:
        data: The raw bytes (not empty).
        name: The file name, for error messages.
        declared: An encoding the file declares (an HTML ``<meta charset>``), tried after
            the byte-order marks.

    Returns:
        ``(text, encoding)``; ``encoding`` is a Python codec name such as ``"utf-8"``,
        ``"utf-16-le"`` or ``"gb18030"``.

    Raises:
        BinaryDataError: The bytes are not text (an image, an executable, NUL bytes…).
    """
    for bom, codec, label in _BOMS:
        if data.startswith(bom):
            text = data[len(bom) :].decode(codec, errors="replace")
            _check_decoded(text, name)
            return text, label

    what = _known_binary_format(data)
    if what is not None:
        raise BinaryDataError(f"'{name}' looks like {what}, not text")
    wide = _wide_encoding_without_bom(data)
    if wide is not None:
        text = data.decode(wide, errors="replace")
        _check_decoded(text, name)
        return text, wide
    utf8 = _try_decode(data, "utf-8")
    if utf8 is None and len(data) % 2 == 0:
        for codec in ("utf-16-le", "utf-16-be"):
            text = _try_decode(data, codec)
            if text is not None and _reads_as_cjk_utf16(text):
                return text, codec
    what = sniff_binary(data)
    if what is not None:
        raise BinaryDataError(f"'{name}' looks like {what}, not text")

    if declared:
        text = _try_decode(data, declared)
        if text is not None:
            _check_decoded(text, name)
            return text, codecs.lookup(declared).name

    if utf8 is not None:
        _check_decoded(utf8, name)
        return utf8, "utf-8"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.reason == _UTF8_TRUNCATED and e.start >= len(data) - 3:
            # A file cut inside its last character (a truncated download): keep it UTF-8.
            text = data.decode("utf-8", errors="replace")
            _check_decoded(text, name)
            return text, "utf-8"

    if _mostly_utf8(data):
        text = data.decode("utf-8", errors="replace")
        _check_decoded(text, name)
        return text, "utf-8"

    text = _try_decode(data, "gb18030")
    if text is not None and _reads_as_chinese(text):
        encoding = "gb18030"
        # EUC-KR, EUC-JP, Shift_JIS and Big5 bytes are often valid GB18030 too; with enough
        # evidence, let charset-normalizer's language models pick among them.
        sample = data[: 4 * _SAMPLE_CHARS]
        if len(sample) - len(sample.translate(None, _HIGH_BYTES)) >= _MIN_EVIDENCE_BYTES:
            guess = _guess_with_charset_normalizer(data, _CJK_CANDIDATES)
            alternative = _try_decode(data, guess) if guess else None
            if alternative is not None:
                text, encoding = alternative, guess
        _check_decoded(text, name)
        return text, encoding

    text = _try_decode(data, "cp1252")
    encoding = "cp1252"
    if text is None:
        text, encoding = data.decode("latin-1"), "latin-1"
    if _non_ascii_letter_ratio(text) > 0.3:
        guess = _guess_with_charset_normalizer(data, _SINGLE_BYTE_CANDIDATES + _CJK_CANDIDATES)
        alternative = _try_decode(data, guess) if guess else None
        if alternative is not None:
            text, encoding = alternative, guess
    _check_decoded(text, name)
    return text, encoding


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_WHATWG_ALIASES = {
    # The HTML standard reads these labels as their supersets.
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "euc_kr": "cp949",
    "shift_jis": "cp932",
}


def declared_html_charset(data: bytes) -> str | None:
    """The charset an HTML document declares in a ``<meta>`` tag, as a Python codec name.

    Args:
        data: The HTML bytes (the first 4 KiB are searched, like browsers do).

    Returns:
        The codec name, or ``None`` if none is declared or the label is unknown.
    """
    match = _META_CHARSET.search(data[:4096])
    if match is None:
        return None
    try:
        name = codecs.lookup(match.group(1).decode("ascii")).name
    except LookupError:
        return None
    if name in ("utf-16", "utf-16-le", "utf-16-be", "utf-32"):
        return None  # a byte-compatible file cannot really be UTF-16; the HTML standard says UTF-8
    return _WHATWG_ALIASES.get(name, name)
