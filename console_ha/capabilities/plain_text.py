"""Whether a text from Home Assistant is plain words, or looks like a link or a secret that must not be passed on.

Used by get_state for the values of its listed attributes, and meant for any read that passes on text an
integration chose (a calendar's summary and location). The rule is a denylist of shapes, so it errs on the
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
    # or a dotted one, so that "12:30" and "0:10:00" stay plain. A name led by a letter may hold a scheme's
    # characters (nvr.local.:8554 ends in the root's dot; tel:0612 and a+:0 are a scheme before a digit).
    r"(?<![\w.+-])(?:[a-z][a-z0-9+.-]*|[a-z0-9-]+(?:\.[a-z0-9-]+)+\.?):\d",
    # IPv6 literals: bracketed ([fe80::1]:554, [::1]), compressed (fe80::1, ::1) or five groups and more.
    r"\[[^\]]*:[^\]]*\]", r"::", r"(?<![\w:])(?:[0-9a-f]{1,4}:){4,}[0-9a-f]{1,4}",
    # UNC paths (\\nas\camera\live) and any doubled backslash; a leading slash (/api/camera_proxy/...).
    r"\\\\", r"^\s*/",
    # key=value of any key (password=hunter2, ?token=..., a=b): household words hold no "=".
    r"[\w.-]\s*=\s*\S",
    # key: value, key=value or key value under a secret's name: "apikey: AKIA…", "Password: x", "db_pass=y".
    r"(?:pass|pwd|secret|token|api[\s_-]?key|key|auth|credential|cookie|session|signature)\w*\s*[:=]\s*\S",
    # A Bearer credential ("Basic" is left: "Basic cleaning" is a vacuum's mode), "token" or "signature" anywhere.
    r"\bbearer\s+[\w~+/.-]{6,}", r"token|signature",
    # Links without a scheme: credentials before an "@", a host with a path, www., an IPv4 address with a path.
    r"[^\s/@:]+:[^\s/@]*@", r"\b(?:[a-z0-9-]+\.)+[a-z][a-z0-9-]*(?::\d+)?/", r"www\.",
    r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d|/)",
    # A long run of letters and digits mixed: an access key, a JWT, a session id (AKIAIOSFODNN7EXAMPLE).
    r"(?=[a-z]*\d)(?=\d*[a-z])[a-z0-9]{20,}",
)
_LINK_OR_SECRET = re.compile("|".join(f"(?:{shape})" for shape in _SHAPES), re.IGNORECASE)
# What every shape above holds at least once: a ":", "/", "\\", "=" or "[" (the "@" shape has a ":"), one of
# the words "bearer", "token", "signature" or "www.", or twenty letters and digits in a row. Text without
# any is plain without trying each shape at each place (a title: microseconds, not tens of them).
_ANY_SHAPE = re.compile(r"[:/\\=\[]|bearer|token|signature|www\.|[a-z0-9]{20}", re.IGNORECASE)


def looks_like_link_or_secret(text: str) -> bool:
    """Whether `text`, read as NFKC normalises it, holds a link, an address, a path or a secret's shape."""
    normalised = unicodedata.normalize("NFKC", text)
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
