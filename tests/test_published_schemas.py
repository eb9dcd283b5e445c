"""What each registered read publishes, pinned: its schemas and words, key order and all, as a program sees them.

The model's `tools` and MCP's `tools/list` are made from these fields (tests/test_capability_invariants.py holds
them to that); a program or a cached prompt sees them serialised, so a change of order is a change too. The
pinned copy is tests/published_schemas.json. A change meant to reach every program is made there as well:
`python -m tests.test_published_schemas` writes the file afresh from the registry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from console_ha.capabilities.registry import CAPABILITIES
from console_ha.capabilities.spec import Capability

PINNED = Path(__file__).resolve().parent / "published_schemas.json"


def published(capability: Capability) -> dict[str, Any]:
    """The fields a program or the household meets, as the capability declares them today."""
    return {
        "description": capability.description,
        "arguments_schema": capability.arguments_schema,
        "published_arguments_schema": capability.published_arguments_schema,
        "argument_messages": dict(capability.argument_messages),
        "result_schema": capability.result_schema,
        "result_meanings": dict(capability.result_meanings),
        "prompt_summary": capability.prompt_summary,
    }


def serialised(value: Any) -> str:
    """`value` as JSON in its own key order, which is what a program receives."""
    return json.dumps(value, ensure_ascii=False)


def pinned() -> dict[str, Any]:
    """The pinned copy, each object in the order the file keeps."""
    loaded: dict[str, Any] = json.loads(PINNED.read_text(encoding="utf-8"))
    return loaded


def test_every_registered_read_is_pinned_and_nothing_else() -> None:
    assert list(pinned()) == [capability.name for capability in CAPABILITIES]


@pytest.mark.parametrize("capability", CAPABILITIES, ids=lambda c: c.name)
def test_what_it_publishes_is_byte_for_byte_the_pinned_copy(capability: Capability) -> None:
    expected = pinned()[capability.name]
    actual = published(capability)
    assert list(actual) == list(expected)
    for field, value in actual.items():
        assert serialised(value) == serialised(expected[field]), f"{capability.name}: {field} changed"


def test_a_reordered_key_counts_as_a_change() -> None:
    """The comparison is of the text: the same keys in another order are caught, as a program would see them."""
    schema = {"type": "object", "required": ["entity_id"]}
    assert serialised(schema) != serialised(dict(reversed(schema.items())))


if __name__ == "__main__":
    PINNED.write_text(json.dumps({c.name: published(c) for c in CAPABILITIES}, ensure_ascii=False, indent=1) + "\n",
                      encoding="utf-8")
