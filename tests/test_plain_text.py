"""The rule for text passed on from Home Assistant: links, addresses, paths and secrets are dropped, in any
form (full-width, mixed case, inside a phrase); ordinary values (numbers, times, versions, phrases) pass."""

from __future__ import annotations

import unicodedata
from datetime import UTC

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console_ha.capabilities.get_state import household_attributes
from console_ha.capabilities.plain_text import _CJK_COLON, _LINK_OR_SECRET, looks_like_link_or_secret

# What the probe (issue 25) saw pass under listed keys.
PROBE_FOUND = [
    "nvr.local:8554", "homeassistant.local:8123", "[fe80::1]:554",
    "javascript:alert(1)", "smb:\\\\h\\s", "\\\\nas\\camera\\live",
    "password=hunter2", "apikey: AKIAIOSFODNN7EXAMPLE", "Bearer abcdef123456",
    "ｈｔｔｐ：／／ｅｘａｍｐｌｅ．ｃｏｍ／ｘ",
    # A fully qualified name ends in the root's dot; a scheme's "+" or "." before a digit (found by the drawn
    # shapes below: "a.:0", "a+:0").
    "nvr.local.:8554", "a.:0", "a+:0", "tel:0612345678",
]
ORDINARY = ["21.5", "on", "0:10:00", "12:30", "1.0.0.25", "2025.4.4", "2026-12-02T07:00:00+00:00",
            "Partly cloudy", "AC/DC", "Track 1/12", "Rated 3.5/5", "Mr. Brightside", "Sigur Rós", "HDMI 1",
            "Interlude: Reprise", "heat_cool", "-3 °C", "Basic cleaning", "ＨＤＭＩ　２",
            # Titles whose words end in a secret's name, or hold "token" or "signature" (issue 25's review).
            "Turkey: A History", "Monkey: Journey to the West", "Whiskey: The Water of Life", "Compass: North",
            "Passion: Live in Paris", "Hockey Night: Game 7", "Tokens of Love", "The Signature Collection",
            # Chinese punctuation: a full-width colon beside Chinese is a pause, not a scheme or a port.
            "Jay Chou：晴天", "周杰伦：晴天", "Wi-Fi：已连接", "PM2.5：良", "温度：21.5 °C", "Très nuageux"]
# Links whose host is written in another script (IDN), with a path or a port (issue 25's review).
IDN_LINKS = ["пример.рф/путь", "例子.测试/路径", "пример.рф:8123", "http：例子.测试/路径", "Voir café.fr/menu",
             "nvr.local.:8554", "localhost.:8123", "a.:0", "a+:0"]


@pytest.mark.parametrize("value", IDN_LINKS)
def test_a_link_to_a_host_in_another_script_is_dropped(value: str) -> None:
    assert looks_like_link_or_secret(value)


@pytest.mark.parametrize("value", PROBE_FOUND)
def test_what_the_probe_passed_is_dropped_under_a_listed_key(value: str) -> None:
    assert looks_like_link_or_secret(value)
    state = {"entity_id": "media_player.tv", "state": "playing", "attributes": {"media_title": value}}
    assert household_attributes(state) == {}


@pytest.mark.parametrize("value", ORDINARY)
def test_ordinary_values_pass(value: str) -> None:
    assert not looks_like_link_or_secret(value)
    state = {"entity_id": "media_player.tv", "state": "playing", "attributes": {"media_title": value}}
    assert household_attributes(state) == {"media_title": value}


# --- The dangerous shapes, drawn at random -------------------------------------------------------------------

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
label = st.text(_LETTERS, min_size=1, max_size=1).flatmap(
    lambda first: st.text(_LETTERS + "0123456789-", max_size=10).map(lambda rest: first + rest.rstrip("-")))
ipv4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda parts: ".".join(map(str, parts)))
host = st.one_of(label, st.lists(label, min_size=2, max_size=4).map(".".join), ipv4)
port = st.integers(1, 65535).map(str)
path = st.lists(st.text(_LETTERS + "0123456789_-", min_size=1, max_size=8), max_size=3).map(
    lambda parts: "".join("/" + part for part in parts))
host_and_port = st.tuples(host, port, path).map(lambda t: f"{t[0]}:{t[1]}{t[2]}")

group = st.integers(0, 0xFFFF).map(lambda n: f"{n:x}")
ipv6_full = st.lists(group, min_size=8, max_size=8).map(":".join)
ipv6_short = st.tuples(st.lists(group, max_size=3), st.lists(group, max_size=3)).map(
    lambda t: ":".join(t[0]) + "::" + ":".join(t[1]))
ipv6 = st.one_of(ipv6_full, ipv6_short, st.tuples(st.one_of(ipv6_full, ipv6_short), st.none() | port).map(
    lambda t: f"[{t[0]}]" + (f":{t[1]}" if t[1] else "")))

scheme = st.text(_LETTERS, min_size=1, max_size=1).flatmap(
    lambda first: st.text(_LETTERS + "0123456789+.-", max_size=9).map(lambda rest: first + rest))
# What follows a scheme's colon: anything but a space (a digit makes it host:port, caught as well).
after_scheme = st.text(st.characters(codec="ascii", exclude_categories=("Cc", "Zs")), min_size=1, max_size=20)
uri = st.tuples(scheme, after_scheme).map(lambda t: f"{t[0]}:{t[1]}")
unc = st.tuples(host, st.lists(label, min_size=1, max_size=3)).map(lambda t: "\\\\" + t[0] + "".join(
    "\\" + part for part in t[1]))

key = st.text(_LETTERS + "_", min_size=1, max_size=1).flatmap(
    lambda first: st.text(_LETTERS + "0123456789_.-", max_size=12).map(lambda rest: first + rest))
secret_value = st.text(st.characters(codec="ascii", exclude_categories=("Cc", "Zs")), min_size=1, max_size=16)
key_is_value = st.tuples(key, st.sampled_from(["=", " = ", "= "]), secret_value).map("".join)
SECRET_NAMES = ["password", "passwd", "pwd", "secret", "token", "apikey", "api_key", "api-key", "api key",
                "credentials", "cookie", "client_secret", "signature", "passphrase", "passcode"]
# Names that are household words too ("Turkey: a history", "Passion: live"): inside an identifier only.
WORD_NAMES = ["pass", "key", "auth", "session"]
secret_name = st.one_of(
    st.tuples(st.text(_LETTERS + "_", max_size=4), st.sampled_from(SECRET_NAMES),
              st.text(_LETTERS + "0123456789_", max_size=4)).map("".join),
    st.tuples(st.sampled_from(["", "_", "db_", "x-", "2"]), st.sampled_from(WORD_NAMES),
              st.sampled_from(["", "s"]) | st.text("0123456789_", min_size=1, max_size=1).flatmap(
                  lambda first: st.text(_LETTERS + "0123456789_", max_size=4).map(lambda rest: first + rest)),
              ).map("".join),
)
key_colon_value = st.tuples(secret_name, st.sampled_from([":", ": ", " : ", ":  "]), secret_value).map("".join)
bearer = st.text(_LETTERS + _LETTERS.upper() + "0123456789-._~+/", min_size=6, max_size=40).map(
    lambda credential: f"Bearer {credential}")

DANGEROUS = {"host:port": host_and_port, "IPv6": ipv6, "URI": uri, "UNC": unc, "key=value": key_is_value,
             "secret: value": key_colon_value, "Bearer": bearer}


def full_width(char: str) -> str:
    # ASCII's printable characters have full-width forms 0xFEE0 above them; a space, the ideographic space.
    if char == " ":
        return "\u3000"
    return chr(ord(char) + 0xFEE0) if "!" <= char <= "~" else char


@st.composite
def disguised(draw: st.DrawFn, shape: st.SearchStrategy[str]) -> str:
    """`shape`, each character maybe upper-cased or full-width, maybe inside a phrase."""
    text = draw(shape)
    forms = draw(st.lists(st.sampled_from(["as is", "upper", "full-width"]), min_size=len(text),
                          max_size=len(text)))
    text = "".join(char.upper() if form == "upper" else full_width(char) if form == "full-width" else char
                   for char, form in zip(text, forms, strict=True))
    before = draw(st.sampled_from(["", "Camera ", "Live at ", "see "]))
    after = draw(st.sampled_from(["", " now", " (main)"]))
    return before + text + after


@pytest.mark.parametrize("kind", sorted(DANGEROUS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_no_dangerous_shape_passes_in_any_form(data: st.DataObject, kind: str) -> None:
    value = data.draw(disguised(DANGEROUS[kind]), label=kind)
    assert looks_like_link_or_secret(value), value


# --- Ordinary values, drawn at random -------------------------------------------------------------------------

PHRASE_WORDS = ["Partly", "cloudy", "Living", "room", "Blue", "in", "Green", "Kitchen", "Morning", "news",
                "heat", "cool", "auto", "Eco", "boost", "Sigur", "Rós", "Album", "Chapter", "Track", "1/12",
                "Vol.", "2", "Mr.", "Brightside", "Interlude:", "Reprise", "AC/DC", "Ouverture", "Küche", "客厅"]
temperature = st.floats(-40, 60, allow_nan=False).map(lambda t: f"{t:.1f}") | st.integers(-40, 60).map(
    lambda t: f"{t} °C")
clock = st.tuples(st.integers(0, 23), st.integers(0, 59), st.none() | st.integers(0, 59)).map(
    lambda t: f"{t[0]}:{t[1]:02d}" + (f":{t[2]:02d}" if t[2] is not None else ""))
version = st.lists(st.integers(0, 2030).map(str), min_size=2, max_size=4).map(".".join)
moment = st.datetimes(timezones=st.just(UTC)).map(lambda when: when.isoformat())
phrase = st.lists(st.sampled_from(PHRASE_WORDS), min_size=1, max_size=4).map(" ".join)
word = st.sampled_from(["on", "off", "idle", "playing", "heat_cool", "temperature", "measurement", "open"])


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(temperature, clock, version, moment, phrase, word))
def test_ordinary_values_pass_whatever_they_hold(value: str) -> None:
    assert not looks_like_link_or_secret(value), value


@pytest.mark.parametrize("text", ["a.:0", "nvr.local.:8554", "svn+ssh:22", "cam-1.:554"])
def test_a_scheme_like_name_or_a_root_dotted_host_before_a_port_is_dropped(text: str) -> None:
    """Hypothesis found "a.:0" passing: a host may end in the root's dot, and a name may hold a scheme's + . -."""
    assert looks_like_link_or_secret(text)


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=st.sampled_from("aAbkKtTeEnNwW01239 .:/\\=[]@+-_#ＡＴｗ：／＝［＠ſK\u00a0"), max_size=40))
def test_the_quick_look_never_passes_what_the_shapes_drop(value: str) -> None:
    """The quick look (`_ANY_SHAPE`) only skips trying the shapes: with it or without, the same text is dropped."""
    read_as = unicodedata.normalize("NFKC", _CJK_COLON.sub("\u3001", value))  # as the rule reads it
    assert looks_like_link_or_secret(value) is (_LINK_OR_SECRET.search(read_as) is not None)


@pytest.mark.parametrize("value", [*PROBE_FOUND, *ORDINARY, "A" * 19 + "1", "token", "www.x", "bearer x"])
def test_the_quick_look_agrees_with_the_shapes_on_the_known_values(value: str) -> None:
    read_as = unicodedata.normalize("NFKC", _CJK_COLON.sub("\u3001", value))  # as the rule reads it
    assert looks_like_link_or_secret(value) is (_LINK_OR_SECRET.search(read_as) is not None)
