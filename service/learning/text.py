"""Text → feature names: word n-grams, character n-grams, e-mail headers and special tokens.

This module turns one string into the *names* of its text features and their values; the
:class:`~service.learning.features.Featurizer` hashes them and places them in the batch. Every
name carries a namespace prefix, so text never shares a name with a named feature on purpose
and the namespaces never share one with each other:

========================  ==================================================================
``w:<gram>``              word n-grams of the body
``c:<gram>``              character n-grams of the body
``h:<field>:<token>``     e-mail header tokens (``email: true``), e.g. ``h:subject:free``
``t:<kind>[:<detail>]``   special tokens (``tokens: [...]``), e.g. ``t:url:example.com``
========================  ==================================================================

Conventions (documented here once, used by every model):

- Word tokens are ``\\w+`` runs of the lower-cased text (Unicode letters, digits, ``_``).
- Word n-grams join ``n`` consecutive tokens with one space: ``"free money"``.
- Character n-grams run over the *normalised* text ``" " + " ".join(tokens) + " "``, so
  punctuation and runs of whitespace are gone and the spaces mark word boundaries: the 4-grams
  of ``"Buy now!"`` are ``" buy"``, ``"buy "``, ``"uy n"``, ``"y no"``, ``" now"``, ``"now "``.
  A text shorter than ``n`` (after normalising) yields no ``n``-gram.
- ``char_limit: N`` keeps only the character n-grams that lie entirely within the first ``N``
  characters (code points) of that normalised text, leading space included: with
  ``char_limit: 8`` the 4-grams of ``"Buy now, pay later"`` (normalised ``" buy now pay later "``)
  stop at ``" now"``, the last 4-gram inside ``" buy now"``. Word n-grams are not limited.
- ``binary`` gives every distinct name the value 1; otherwise its count.

E-mail (``email: true``). A text *looks like a message* when it starts with an RFC 822 header
block — optionally after an mbox ``From …`` line — of lines ``Name: value`` (or continuation
lines starting with a space or a tab), at least one of them a standard field
(:data:`MAIL_FIELDS`), ended by a blank line or by the end of the text. Such a text is parsed
with the standard library's :mod:`email` package (never raising: malformed mail degrades to
its raw text):

- the header fields :data:`HEADER_FIELDS` (``subject``, ``from``, ``to``, ``cc``,
  ``reply-to``), decoded from RFC 2047 encoded words, give the word n-grams of their value as
  ``h:<field>:<gram>`` (the word n-gram range of the spec, unigrams when it has none), and the
  address fields add the domain of each address as ``h:<field>:@<domain>``;
- each MIME part adds ``h:part:<type>/<subtype>`` (an attachment's type says much about spam);
- the body is every ``text/plain`` part (or, when there is none, every ``text/html`` part with
  its tags, scripts and styles removed and entities decoded; the ``href`` targets are kept as
  text), decoded from quoted-printable or base64 in its declared charset; the body gives the
  ``w:``/``c:`` features exactly as a plain text would.

A text that does not look like a message is all body, so ``email: true`` is safe on a stream
that mixes SMS, bare bodies and whole messages. Header and special-token names are cut to
:data:`MAX_EXTRA_CHARS` characters.

Special tokens (``tokens``: any of :data:`TOKEN_KINDS`), found in the original-case body:

- ``url``: ``t:url`` per URL (``http://``, ``https://`` or ``www.``), and ``t:url:<host>``
  (lower-cased, ``www.``, user and port removed);
- ``number``: ``t:num:<d>`` per run of ``d`` digits (``d`` capped at 16): phone numbers and
  short codes;
- ``currency``: ``t:cur`` per amount with a currency sign or code (``£5``, ``$1,000``,
  ``100 EUR``), and ``t:cur:<sign>`` with the sign as written (``£``, ``$``, ``eur``…);
- ``caps``: ``t:caps`` per upper-case word of at least two characters (``FREE``, ``URGENT``),
  and ``t:caps:<word>`` lower-cased.

>>> t = TextFeaturizer(word_ngrams=(1, 2), char_ngrams=None, binary=False)
>>> words, chars = t.tokens("Free money, FREE!")
>>> sorted(words.items())
[('free', 2), ('free money', 1), ('money', 1), ('money free', 1)]
>>> chars
{}
>>> TextFeaturizer(word_ngrams=None, char_ngrams=(4, 4)).tokens("Buy now!")[1]
{' buy': 1, 'buy ': 1, 'uy n': 1, 'y no': 1, ' now': 1, 'now ': 1}
>>> TextFeaturizer(word_ngrams=None, char_ngrams=(4, 4), char_limit=8).tokens("Buy now, pay")[1]
{' buy': 1, 'buy ': 1, 'uy n': 1, 'y no': 1, ' now': 1}
>>> mail = "From: Ann <ann@example.com>\\nSubject: WIN cash\\n\\nCall 08001234567 now"
>>> t = TextFeaturizer(email=True, tokens=("number", "caps"))
>>> list(t.features(mail))  # doctest: +NORMALIZE_WHITESPACE
['w:call', 'w:08001234567', 'w:now', 'h:subject:win', 'h:subject:cash', 'h:from:ann',
 'h:from:example', 'h:from:com', 'h:from:@example.com', 'h:part:text/plain', 't:num:11']
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterable

WORD_RE = re.compile(r"\w+")

MAX_NGRAM = 16
"""Largest n accepted for word or character n-grams (beyond that, features never repeat)."""

MAX_CHAR_LIMIT = 1 << 26
"""Largest ``char_limit`` accepted (the largest text the offline commands read)."""

HEADER_FIELDS = ("subject", "from", "to", "cc", "reply-to")
"""The header fields whose tokens become ``h:<field>:`` features (``email: true``)."""

ADDRESS_FIELDS = frozenset({"from", "to", "cc", "reply-to"})

MAIL_FIELDS = frozenset(
    {"from", "to", "cc", "subject", "date", "received", "return-path", "message-id",
     "mime-version", "content-type", "sender", "reply-to", "delivered-to", "x-mailer"}
)  # fmt: skip
"""Standard header names: a header block must hold at least one to be taken for a message."""

MAX_EXTRA_CHARS = 256
"""E-mail header and special-token names are cut to this many characters (a malformed message
never fails, and no name it yields is longer)."""

TOKEN_KINDS = ("url", "number", "currency", "caps")
"""The special token kinds of the ``tokens`` option."""

_HEADER_LINE = re.compile(r"[!-9;-~]+:")  # RFC 5322 field name: printable ASCII except ':'
_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'()\[\]{}]+", re.IGNORECASE)
_HOST = re.compile(r"^(?:https?://)?(?:[^/@\s]*@)?([^/:?#\s]+)", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
# Every pattern here runs in linear time on any input (no nested or overlapping repeats that
# backtrack): an amount is a maximal run of digits, commas and dots, its sign is looked up
# right before or right after it.
_AMOUNT = re.compile(r"([$£€¥₹]?)\s?\d[\d,.]*")
_CURRENCY_AFTER = re.compile(r"\s?([$£€¥₹]|usd|eur|gbp|dollars?|pounds?|euros?)\b", re.IGNORECASE)
_DOMAIN = re.compile(r"@([\w.-]+\w)")
_HREF = re.compile(r"""href\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)
_TAG = re.compile(r"<[^<>]*>")
MAX_DIGITS_TOKEN = 16
_NUM_NAMES = [f"t:num:{d}" for d in range(MAX_DIGITS_TOKEN + 1)]
_ANY_DIGIT = re.compile(r"\d")
_WORD2 = re.compile(r"\w\w+")


class TextFeaturizer:
    """Tokenizer for one text spec; pure Python, no hashing (the caller hashes).

    :meth:`features` is the reference for every option; :meth:`tokens` gives the body's word
    and character n-grams alone (what the compiled path of the featurizer computes), and
    :meth:`extras` the e-mail header and special-token names.
    """

    __slots__ = ("binary", "char_limit", "char_ngrams", "email", "token_kinds", "word_ngrams")

    def __init__(
        self,
        *,
        word_ngrams: tuple[int, int] | None = (1, 1),
        char_ngrams: tuple[int, int] | None = None,
        binary: bool = True,
        char_limit: int | None = None,
        email: bool = False,
        tokens: Iterable[str] = (),
    ) -> None:
        for field, rng in (("word_ngrams", word_ngrams), ("char_ngrams", char_ngrams)):
            if rng is not None:
                check_ngram_range(field, rng)
        if word_ngrams is None and char_ngrams is None:
            raise ValueError("text: at least one of word_ngrams and char_ngrams must be set")
        self.word_ngrams = word_ngrams
        self.char_ngrams = char_ngrams
        self.binary = binary
        self.char_limit = check_char_limit(char_limit)
        self.email = bool(email)
        self.token_kinds = check_token_kinds(tokens)

    # -- the body ------------------------------------------------------------------------------
    def tokens(self, text: str) -> tuple[dict[str, int], dict[str, int]]:
        """(word n-grams → value, character n-grams → value) of one (body) text."""
        words = WORD_RE.findall(text.lower())
        wgrams: list[str] = []
        if self.word_ngrams is not None:
            wgrams = word_grams(words, self.word_ngrams)
        cgrams: list[str] = []
        if self.char_ngrams is not None:
            s = " " + " ".join(words) + " " if words else ""
            if self.char_limit is not None:
                s = s[: self.char_limit]
            lo, hi = self.char_ngrams
            for n in range(lo, hi + 1):
                cgrams.extend([s[i : i + n] for i in range(len(s) - n + 1)])
        return self._values(wgrams), self._values(cgrams)

    # -- everything ------------------------------------------------------------------------------
    @property
    def has_extras(self) -> bool:
        """Whether texts may yield more than the body's ``w:``/``c:`` names."""
        return self.email or bool(self.token_kinds)

    def split(self, text: str) -> tuple[str, list[str]]:
        """(body, extra names in order with repeats): the body goes to :meth:`tokens`."""
        extra: list[str] = []
        body = text
        if self.email:
            parsed = parse_message(text)
            if parsed is not None:
                headers, parts, body = parsed
                for name, value in headers:
                    grams = word_grams(WORD_RE.findall(value.lower()), self.word_ngrams or (1, 1))
                    extra.extend(f"h:{name}:{g}" for g in grams)
                    if name in ADDRESS_FIELDS:
                        extra.extend(f"h:{name}:@{d.lower()}" for d in _DOMAIN.findall(value))
                extra.extend(f"h:part:{p}" for p in parts)
        if self.token_kinds:
            extra.extend(special_tokens(body, self.token_kinds))
        if any(len(name) > MAX_EXTRA_CHARS for name in extra):  # a giant host or header word
            extra = [name[:MAX_EXTRA_CHARS] for name in extra]
        return body, extra

    def extras(self, text: str) -> tuple[str, dict[str, int]]:
        """(body, e-mail header and special-token names → value) of one text."""
        body, extra = self.split(text)
        return body, self._values(extra)

    def features(self, text: str) -> dict[str, int]:
        """Every prefixed name of one text → its value, in the order the featurizer emits
        them: body words, body characters, then e-mail headers and special tokens."""
        body, extra = self.extras(text) if self.has_extras else (text, {})
        words, chars = self.tokens(body)
        out = {"w:" + g: v for g, v in words.items()}
        out.update(("c:" + g, v) for g, v in chars.items())
        out.update(extra)
        return out

    def _values(self, grams: list[str]) -> dict[str, int]:
        if self.binary:
            return dict.fromkeys(grams, 1)
        return dict(Counter(grams))


def word_grams(words: list[str], rng: tuple[int, int]) -> list[str]:
    """The word n-grams of a token list, for n in ``lo..hi``, in order (with repeats)."""
    lo, hi = rng
    out: list[str] = []
    for n in range(lo, hi + 1):
        if n == 1:
            out.extend(words)
        else:
            out.extend(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))
    return out


def special_tokens(text: str, kinds: tuple[str, ...]) -> list[str]:
    """The ``t:`` names of one text for the given kinds, in kind order (with repeats)."""
    out: list[str] = []
    digits = _ANY_DIGIT.search(text) is not None  # numbers and amounts need one
    for kind in kinds:
        if kind == "url":
            if "://" not in text and "ww." not in text.lower():
                continue
            for url in _URL.findall(text):
                out.append("t:url")
                m = _HOST.match(url)
                if m:
                    host = m.group(1).lower().rstrip(".")
                    out.append("t:url:" + host.removeprefix("www."))
        elif kind == "number":
            if digits:
                out.extend(
                    [_NUM_NAMES[min(len(d), MAX_DIGITS_TOKEN)] for d in _DIGITS.findall(text)]
                )
        elif kind == "currency":
            if digits:
                for m in _AMOUNT.finditer(text):
                    sign = m.group(1)
                    if not sign:
                        after = _CURRENCY_AFTER.match(text, m.end())
                        if after is None:
                            continue
                        sign = after.group(1)
                    out.append("t:cur")
                    out.append("t:cur:" + sign.lower())
        else:  # caps
            for w in [w for w in _WORD2.findall(text) if w.isupper()]:
                out.append("t:caps")
                out.append("t:caps:" + w.lower())
    return out


def looks_like_message(text: str) -> bool:
    """Whether ``text`` starts with an RFC 822 header block (see the module docstring)."""
    lines = text[:65536].split("\n")
    start = 1 if lines and lines[0].startswith("From ") else 0
    known = False
    seen = 0
    for line in lines[start:]:
        line = line.rstrip("\r")
        if not line:
            break
        if line[0] in " \t":
            if seen == 0:
                return False
            continue
        m = _HEADER_LINE.match(line)
        if m is None:
            return False
        seen += 1
        known = known or line[: m.end() - 1].lower() in MAIL_FIELDS
    return known


def parse_message(text: str) -> tuple[list[tuple[str, str]], list[str], str] | None:
    """(headers of :data:`HEADER_FIELDS` as (name, decoded value), MIME part types, body) of a
    text that looks like a message, else None. Never raises: on any parsing failure the text
    after the header block is the body."""
    if not looks_like_message(text):
        return None
    try:
        return _parse(text)
    except Exception:  # malformed mail of any kind: degrade to the raw text after the headers
        _head, sep, rest = text.replace("\r\n", "\n").partition("\n\n")
        return [], [], rest if sep else ""


def _parse(text: str) -> tuple[list[tuple[str, str]], list[str], str]:
    import email
    import email.header
    import email.policy

    if text.startswith("From "):
        text = text.partition("\n")[2]
    msg = email.message_from_string(text, policy=email.policy.compat32)
    headers: list[tuple[str, str]] = []
    for name in HEADER_FIELDS:
        for raw in msg.get_all(name) or ():
            headers.append((name, _decode_header(raw)))
    parts: list[str] = []
    plain: list[str] = []
    htmls: list[str] = []
    for part in msg.walk():
        ctype = part.get_content_type().lower()
        if part.is_multipart():
            continue
        parts.append(ctype)
        if ctype not in ("text/plain", "text/html"):
            continue
        payload = part.get_payload(decode=True)
        if isinstance(payload, bytes):
            content = _decode_bytes(payload, part.get_content_charset())
        else:
            content = str(part.get_payload())
        (plain if ctype == "text/plain" else htmls).append(content)
    body = "\n".join(plain) if plain else "\n".join(_html_text(h) for h in htmls)
    return headers, parts, body


def _decode_header(raw: object) -> str:
    import email.header

    try:
        pieces = email.header.decode_header(str(raw))
        return "".join(_decode_bytes(p, cs) if isinstance(p, bytes) else str(p) for p, cs in pieces)
    except Exception:
        return str(raw)


def _decode_bytes(payload: bytes, charset: str | None) -> str:
    try:
        return payload.decode(charset or "utf-8", errors="replace")
    except LookupError:  # an unknown charset name
        return payload.decode("latin-1")


def _html_text(markup: str) -> str:
    """The text of an HTML part: scripts and styles dropped, tags removed, entities decoded,
    link targets kept."""
    hrefs = _HREF.findall(markup)
    text = html.unescape(_TAG.sub(" ", _drop_scripts(markup)))
    return text + (" " + " ".join(hrefs) if hrefs else "")


def _drop_scripts(markup: str) -> str:
    """The markup without its ``<script>``/``<style>`` blocks (an unclosed one runs to the
    end), in one left-to-right pass."""
    lower = markup.lower()
    if "<script" not in lower and "<style" not in lower:
        return markup
    out: list[str] = []
    pos = 0
    nxt = {"<script": lower.find("<script"), "<style": lower.find("<style")}
    while True:
        for tag, at in nxt.items():  # each search moves forward only: linear in all
            if 0 <= at < pos:
                nxt[tag] = lower.find(tag, pos)
        starts = [at for at in nxt.values() if at >= 0]
        if not starts:
            out.append(markup[pos:])
            return " ".join(out)
        i = min(starts)
        out.append(markup[pos:i])
        close = "</script" if lower.startswith("<script", i) else "</style"
        j = lower.find(close, i)
        if j < 0:
            return " ".join(out)
        k = lower.find(">", j)
        pos = len(markup) if k < 0 else k + 1


def check_ngram_range(field: str, rng: object) -> tuple[int, int]:
    """Validate an n-gram range ``(lo, hi)`` with ``1 ≤ lo ≤ hi ≤ MAX_NGRAM``."""
    if not isinstance(rng, tuple | list) or len(rng) != 2 or not all(type(v) is int for v in rng):
        raise ValueError(f"{field} must be a pair [lo, hi] of integers, got {rng!r}")
    lo, hi = rng
    if not 1 <= lo <= hi <= MAX_NGRAM:
        raise ValueError(f"{field} must satisfy 1 <= lo <= hi <= {MAX_NGRAM}, got {list(rng)}")
    return int(lo), int(hi)


def check_char_limit(value: object) -> int | None:
    """Validate ``char_limit``: None (no limit) or an integer in ``1..MAX_CHAR_LIMIT``."""
    if value is None:
        return None
    if type(value) is not int or not 1 <= value <= MAX_CHAR_LIMIT:
        raise ValueError(
            f"char_limit must be null or an integer in 1..{MAX_CHAR_LIMIT}, got {value!r}"
        )
    return value


def check_token_kinds(value: object) -> tuple[str, ...]:
    """Validate ``tokens``: a list of distinct kinds from :data:`TOKEN_KINDS`; returned in the
    canonical order of :data:`TOKEN_KINDS` (the order their names are emitted in)."""
    if not isinstance(value, list | tuple) or not all(type(k) is str for k in value):
        raise ValueError(f"tokens must be a list of names from {list(TOKEN_KINDS)}, got {value!r}")
    unknown = [k for k in value if k not in TOKEN_KINDS]
    if unknown:
        raise ValueError(f"unknown token kind {unknown[0]!r}; expected some of {list(TOKEN_KINDS)}")
    if len(set(value)) != len(value):
        raise ValueError(f"tokens must not repeat a kind, got {list(value)!r}")
    return tuple(k for k in TOKEN_KINDS if k in value)
