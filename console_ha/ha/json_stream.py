"""A JSON answer read as its pieces arrive, never held whole: parser events, or an array cut into parsed pieces.

Any Home Assistant read that may be large (history today; statistics and the logbook next) reads its answer
here. Why neither library alone does it:

- ijson streams, but its prefix-based readers (`items`, `kvitems`) keep a prefix string per level, so a small
  body nested thousands deep costs memory that grows with the square of its depth, and its `basic_parse`
  events cost about 1.6 µs a row in Python: a second a million rows.
- orjson is fast, but parses only a whole text: a week of a chatty sensor would be held whole, bytes and
  objects, before the first row is read.

So `parse_events` gives ijson's `basic_parse` events (no prefixes kept) for any layout, and `array_pieces`
cuts an array of objects that Home Assistant writes compactly at the boundaries between its objects, so
orjson parses each piece while the next frames arrive. The caller names its errors: a reader does not
know whose answer it reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import ijson
import orjson

# The parser turns all it is given into events at once: slices keep a burst of brackets small.
PARSE_SLICE_BYTES = 8 * 1024
_OPEN = ord("[")
_CLOSE = ord("]")


def parse_events(chunks: Iterable[bytes]) -> Iterator[tuple[str, Any]]:
    """ijson's basic_parse events of a JSON text arriving in pieces, without holding it whole."""
    events = ijson.sendable_list()
    parser = ijson.basic_parse_coro(events, use_float=True)
    for chunk in chunks:
        # In slices: the parser turns all it is given into events at once, and a slice of brackets
        # is one event a byte, refused only once the caller sees them.
        for offset in range(0, len(chunk), PARSE_SLICE_BYTES):
            parser.send(chunk[offset:offset + PARSE_SLICE_BYTES])
            if events:
                yield from events
                del events[:]
    parser.close()  # the end of the text: one cut short raises here
    yield from events


def take_head(chunks: Iterator[bytes], size: int) -> bytearray:
    """The first pieces of an answer, at least `size` bytes of it (all of it, if it is shorter)."""
    head = bytearray()
    for chunk in chunks:
        head += chunk
        if len(head) >= size:
            break
    return head


def array_pieces(buffer: bytearray, chunks: Iterator[bytes], *, boundary: bytes, tail: bytes, piece_bytes: int,
                 max_item_bytes: int, invalid: Callable[[], Exception],
                 too_long: Callable[[], Exception]) -> Iterator[list[Any]]:
    """The items of a JSON array of objects, parsed by orjson a piece at a time as the chunks arrive.

    `buffer` starts at the array's `[`; the array's `]` and what follows it (`tail`) end the text. `boundary`
    starts with the `},{` between two objects and must be something no string can hold (for Home
    Assistant's compact rows, `},{"s":`: a string's closing quote is never followed by `s":`). A piece
    that is not JSON raises `invalid()` (outside orjson's error, which quotes the text); no boundary within
    `max_item_bytes` raises `too_long()`. Each piece is parsed where it lies: its `,` after the last
    object becomes the `]` that closes it, and the `]` left behind becomes the next piece's `[`.
    """
    for chunk in chunks:
        buffer += chunk
        if len(buffer) < piece_bytes:
            continue
        cut = buffer.rfind(boundary)
        if cut < 0:
            if len(buffer) > max_item_bytes:
                raise too_long()
            continue
        buffer[cut + 1] = _CLOSE
        yield _loads(buffer, cut + 2, invalid)
        del buffer[:cut + 1]  # a bytearray drops its front without copying the rest
        buffer[0] = _OPEN
    if not buffer.endswith(b"]" + tail):
        raise invalid()
    yield _loads(buffer, len(buffer) - len(tail), invalid)


def _loads(buffer: bytearray, end: int, invalid: Callable[[], Exception]) -> Any:
    """orjson's parse of buffer[:end], read in place; its error raised as `invalid()`, without the text."""
    failure = False
    with memoryview(buffer) as whole, whole[:end] as piece:  # released before the buffer is cut
        try:
            parsed = orjson.loads(piece)
        except orjson.JSONDecodeError:
            failure = True
    if failure:
        raise invalid()
    return parsed
