"""Request bodies: a JSON object or a contract error, never a crash."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from flask import request

from console_ha.errors import InvalidRequest
from console_ha.unknown_keys import first_unknown


def json_object(*, optional: bool = False, allowed: Iterable[str] | None = None) -> dict[str, Any]:
    """The request body as a JSON object; INVALID_REQUEST for anything else (413 past the size cap).

    With `allowed`, a key outside it is INVALID_REQUEST naming that key (cut, as unknown_keys says).
    """
    raw = request.get_data(cache=True)
    if not raw.strip():
        if optional:
            return {}
        raise InvalidRequest("The request needs a JSON object as its body.")
    if not request.is_json:
        raise InvalidRequest("Send the request body as JSON (Content-Type: application/json).")
    try:
        data = json.loads(raw)
        # "\ud800" is valid JSON but no text: it would fail later, wherever the string is written out.
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidRequest("The request body has text that is not valid Unicode.") from err
    except (ValueError, RecursionError) as err:
        raise InvalidRequest("The request body is not valid JSON.") from err
    if not isinstance(data, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    if allowed is not None and (unknown := first_unknown(data, allowed)) is not None:
        raise InvalidRequest(f"Unknown field: {unknown}.", field=unknown)
    return data
