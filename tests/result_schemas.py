"""A capability result against its declared result schema: the check every test that sees a result makes."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from jsonschema import FormatChecker
from jsonschema.protocols import Validator

from console_ha.capabilities.registry import REGISTRY
from console_ha.capabilities.spec import SchemaValidator


@cache
def _validator(name: str) -> Validator:
    # With formats (rfc3339-validator checks "date-time"), so a timestamp written another way fails too.
    return SchemaValidator(REGISTRY[name].result_schema, format_checker=FormatChecker())


def result_schema_errors(name: str, result: Any) -> Iterator[str]:
    """Each way `result` departs from capability `name`'s declared result schema, in words."""
    for error in _validator(name).iter_errors(result):
        where = "/".join(str(part) for part in error.absolute_path) or "(the result)"
        yield f"{name} result at {where}: {error.message}"


def assert_matches_result_schema(name: str, result: Any) -> None:
    """Fail unless `result` is what capability `name` declares it returns."""
    errors = list(result_schema_errors(name, result))
    assert not errors, "\n".join(errors[:10])
