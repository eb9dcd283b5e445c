"""What a plugin may hand back: a narrowing of what it was given, and arguments only as a dict.

`narrows` is the result rule of `after_toolcall` (contract, "Plugins and stage hooks"): nothing the original
did not hold. The executor also validates such a result against the capability's result schema; the two
together keep a plugin from widening what reaches the model, a program or the audit.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard


def narrows(original: object, candidate: object) -> bool:
    """Whether `candidate` holds nothing `original` did not, removal being the only change.

    A dict may only lose keys, each kept value narrowing the original's; a list may only lose items, those
    kept in their original order, each narrowing its original; any other value must be equal and of the same
    type (`1`, `True` and `1.0` differ; so do `0.0` and `-0.0`, which JSON writes apart). Exact types
    throughout, a dict's keys too (exact text): a subclass could answer `==`, `hash` or `keys()` as it likes,
    so a key equal to one of the original's could be written as another name.

    Linear in the two sizes, whatever the candidate: each original item is compared with at most one candidate
    item, and the recursion goes no deeper than the original does (a hook's answer cannot make it slow).
    """
    if type(candidate) is not type(original):
        return False
    if isinstance(original, dict) and isinstance(candidate, dict):
        return _dict_narrows(original, candidate)
    if isinstance(original, list) and isinstance(candidate, list):
        return _list_narrows(original, candidate)
    if isinstance(original, float) and isinstance(candidate, float):
        return candidate == original and math.copysign(1.0, candidate) == math.copysign(1.0, original)
    return bool(candidate == original)


def _dict_narrows(original: dict[Any, Any], candidate: dict[Any, Any]) -> bool:
    return all(type(key) is str and key in original and narrows(original[key], value)
               for key, value in candidate.items())


def _list_narrows(original: list[Any], candidate: list[Any]) -> bool:
    """Whether `candidate` is a subsequence of `original`, item by item narrowing.

    Each kept item is matched with the earliest original item after the previous match that it narrows:
    the earliest leaves the most for the items after it, so if any matching exists this finds one.
    """
    position = 0
    for item in candidate:
        while position < len(original) and not narrows(original[position], item):
            position += 1
        if position == len(original):
            return False
        position += 1
    return True


def is_arguments(value: object) -> TypeGuard[dict[str, Any]]:
    """Whether what `before_toolcall` returned can stand as arguments: a dict with text keys, of JSON values only.

    JSON values of their exact types (text, numbers, true/false, null, lists and objects with text keys), as
    the model's own arguments are: a str subclass could compare and hash as an allowlisted entity (stage 3's
    `in`) while its text, which the card shows and the read asks for, is another. No more is asked here: the
    executor validates them again from stage 2 (the capability's argument schema) and checks them at stage 3
    (the allowlist), as if the model had asked for them.
    """
    return type(value) is dict and _plain(value, MAX_ARGUMENT_DEPTH)


# How deep arguments a hook returns may nest (the capabilities' own go two levels down): past it they are no
# arguments, rather than a RecursionError.
MAX_ARGUMENT_DEPTH = 16


def _plain(value: object, depth: int) -> bool:
    if type(value) in (str, int, bool) or value is None:
        return True
    if isinstance(value, float) and type(value) is float:
        return math.isfinite(value)
    if depth <= 0:
        return False
    if isinstance(value, list) and type(value) is list:
        return all(_plain(item, depth - 1) for item in value)
    if isinstance(value, dict) and type(value) is dict:
        return all(type(key) is str and _plain(item, depth - 1) for key, item in value.items())
    return False
