"""Whether a text from Home Assistant is plain words, or looks like a link or a secret that must not be passed on.

Used by get_state for the values of its listed attributes, and, with dial-in codes as well (`household_text`), by
every read that passes on text an integration chose (a calendar's summary and location, a to-do item's summary,
a forecast's condition). The rule is a denylist of shapes, so it errs on the
side of dropping: a household answer is a word, a number, a time or a short phrase, and a value dropped
costs a detail, while a link or a secret passed on can be followed or repeated by the model.
"""

from __future__ import annotations

import math
import re
import unicodedata

from console_ha.capabilities.entity_budget import cut

# The shapes, each on its own line, matched case-insensitively against the text after NFKC normalisation
# (so a full-width "ｈｔｔｐ：／／" or "ｎｖｒ．ｌｏｃａｌ：８５５４" is the ASCII it looks like). A shape starts where
# a word does: `(?<![\w.+-])` keeps the hour of an ISO date-time ("2026-12-02T07:00") and "12:30" plain.
_SHAPES = (
    # Any URI scheme followed by something that is not a space or a digit: http://, rtsp://, data:,
    # javascript:alert(1), smb:\\h\s, mailto:, tel:+... ("Note: x" has a space; "cam:554" is host:port below).
    r"(?<![\w.+-])[a-z][a-z0-9+.-]*:(?=[^\s\d])",
    # A script scheme runs with a space after its colon too ("javascript: alert(1)").
    r"(?:java|vb)script\s*:",
    # A host and a port: nvr.local:8554, localhost:8123, an IPv4 address with a port; a name led by a letter
    # or a dotted one, so that "12:30" and "0:10:00" stay plain. A dotted name in any script (пример.рф:8123),
    # and a name written whole, with the root's trailing dot (nvr.local.:8554); or a scheme before a digit (a+:0).
    r"(?<![\w.+-])(?:[a-z][a-z0-9+.-]*|(?:[^\W_]|-)+(?:\.(?:[^\W_]|-)+)+)\.?:\d",
    # IPv6 literals: bracketed ([fe80::1]:554, [::1]), compressed (fe80::1, ::1) or five groups and more.
    r"\[[^\]]*:[^\]]*\]", r"::", r"(?<![\w:])(?:[0-9a-f]{1,4}:){4,}[0-9a-f]{1,4}",
    # UNC paths (\\nas\camera\live) and any doubled backslash; a leading slash (/api/camera_proxy/...).
    r"\\\\", r"^\s*/",
    # key=value of any key (password=hunter2, ?token=..., a=b): household words hold no "=".
    r"[\w.-]\s*=\s*\S",
    # key: value or key=value under a secret's name: "apikey: AKIA…", "Password: x", "dbpassword:y". A name
    # that is only a secret's (password, token...) counts inside any word; one that is also a household word
    # (pass, key, auth, session) only as a word or a part of an identifier ("db_pass", "key2"), so that
    # "Turkey: a history", "Monkey: Journey to the West" or "Passion: live" are the titles they are.
    r"(?:pass(?:word|wd|phrase|code)|pwd|secret|token|api[\s_-]?key|credential|cookie|signature)\w*\s*[:=]\s*\S",
    r"(?<![^\W\d_])(?:pass|key|auth|session)(?:s|[_\d]\w*)?\s*[:=]\s*\S",
    # A Bearer credential ("Basic" is left: "Basic cleaning" is a vacuum's mode); "token" or "signature" as part
    # of an identifier (access_token, x-amz-signature), not as the words of a title ("Tokens of Love").
    r"\bbearer\s+[\w~+/.-]{6,}", r"[\w-](?:token|signature)|(?:token|signature)s?[_-]\w",
    # Links without a scheme: credentials before an "@", a host with a path, www., an IPv4 address with a path.
    # A host's labels and its top-level name in any script: пример.рф/путь and 例子.测试/路径 are links too.
    r"[^\s/@:]+:[^\s/@]*@", r"\b(?:(?:[^\W_]|-)+\.)+[^\W\d_](?:[^\W_]|-)*(?::\d+)?/", r"www\.",
    r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d|/)",
    # A long run of letters and digits mixed: an access key, a JWT, a session id (AKIAIOSFODNN7EXAMPLE).
    r"(?=[a-z]*\d)(?=\d*[a-z])[a-z0-9]{20,}",
)
_LINK_OR_SECRET = re.compile("|".join(f"(?:{shape})" for shape in _SHAPES), re.IGNORECASE)
# What every shape above holds at least once: a ":", "/", "\\", "=" or "[" (the "@" shape has a ":"), one of
# the words "bearer", "token", "signature" or "www.", or twenty letters and digits in a row. Text without
# any is plain without trying each shape at each place (a title: microseconds, not tens of them).
_ANY_SHAPE = re.compile(r"[:/\\=\[]|bearer|token|signature|www\.|[a-z0-9]{20}", re.IGNORECASE)
# Chinese and Japanese write a full-width colon as punctuation, with no space after it ("Jay Chou：晴天",
# "Wi-Fi：已连接"): beside a CJK character it is read as a pause, not as the ":" NFKC makes of it, which
# would look like a scheme or a port. Beside a CJK letter only (its punctuation and the ideographic space are
# no words); beside anything else (ｈｔｔｐ：／／, ｎｖｒ．ｌｏｃａｌ：８５５４) it stays a colon.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_COLON = re.compile(f"(?<=[{_CJK}])\uff1a|\uff1a(?=[{_CJK}])")


def looks_like_link_or_secret(text: str) -> bool:
    """Whether `text`, read as NFKC normalises it, holds a link, an address, a path or a secret's shape."""
    normalised = unicodedata.normalize("NFKC", _CJK_COLON.sub("\u3001", text))
    return _ANY_SHAPE.search(normalised) is not None and _LINK_OR_SECRET.search(normalised) is not None


def plain_value(value: object, max_chars: int) -> bool:
    """A value a household answer can use and that carries no link: bool, finite number, short clean text."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) < 2**53  # what a JSON reader holds exactly
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        # cut() drops control and format characters: text it changes is text we do not pass on. A link or a
        # secret is dropped even under a listed key, for an integration that puts a URL where a title should be.
        return (0 < len(value) <= max_chars and cut(value, 4 * max_chars) == value
                and not looks_like_link_or_secret(value))
    return False  # lists, objects and null


# --- text an integration chose that a read passes on (a calendar's title, a to-do item, a forecast's condition) ---

# The longest such text passed on: a title or a place, not a description.
HOUSEHOLD_TEXT_CHARS = 64
# What a dial-in or a secret looks like, beyond the links and tokens above, matched against the text as NFKC
# normalises it (a full-width "ＰＩＮ ４４２１" is the ASCII it looks like): a phone number, however it is
# grouped (seven digits and more with spaces, dots, dashes or brackets between them, as "020 7946 0000" and
# "(0800) 123-4567", which is also how PINs, meeting ids and account numbers look), the words that introduce
# a dial-in, a PIN or a password, and a code's shapes ("code: 4421", "ID 8841", "123 456 #").
# Text that matches is dropped whole: a cut could keep the digits and lose the word that warned of them.
_DIAL_IN = re.compile(
    r"(?i)\+\d[\d ().-]{6,}\d|\d(?:[\s().-]{0,3}\d){6,}"
    r"|\b(?:pin|passcode|password|passwort|kennwort|wachtwoord|contrase[ñn]a|senha|pwd|pw|secret|api[ _-]?key"
    r"|dial[ -]?in)\b"
    r"|\b(?:conference|access|meeting|participant|dial[ -]?in|host|bridge)\s*(?:code|id|number|no\b|#)"
    r"|\b(?:code|id)\s*[:#=]?\s*\d{3,}|#\s*\d{3,}|\d{3,}\s*#")
# A date as a household writes one (2026-12-05, 05.12.2026, 12/5/26): its digits are not a phone number's.
_DATE = re.compile(r"\b(?:\d{4}-\d{2}-\d{2}|\d{1,2}([./-])\d{1,2}\1(?:\d{4}|\d{2}))\b")


def household_text(value: object) -> str | None:
    """`value` when it is short plain text with no link, dial-in code or secret in it; None otherwise."""
    if isinstance(value, str) and plain_value(value, HOUSEHOLD_TEXT_CHARS):
        read_as = _DATE.sub(" ", unicodedata.normalize("NFKC", value))
        if _DIAL_IN.search(read_as) is None:
            return value
    return None
