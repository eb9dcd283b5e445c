"""The model adapter's own requests, by syntax tree: one POST, to `{endpoint}/chat/completions`, and one GET.

tests/test_ha_client.py proves no other module sends anything but GET, and exempts the adapter; this holds
the adapter itself to the two requests the contract names, so a POST elsewhere cannot creep in there.
"""

from __future__ import annotations

import ast
from pathlib import Path

import console_ha.conversation.model as adapter

VERBS = {"get", "post", "put", "patch", "delete", "request", "head", "options", "send"}


def _requests(tree: ast.AST) -> list[tuple[str, str]]:
    """(verb, URL as written) of every call of an HTTP verb on a session."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in VERBS
                and "session" in ast.unparse(node.func.value).lower()):
            url = ast.unparse(node.args[0]) if node.args else "<no URL>"
            found.append((node.func.attr, url))
    return found


def test_the_adapter_posts_only_to_chat_completions_and_gets_only_models() -> None:
    tree = ast.parse(Path(adapter.__file__).read_text(encoding="utf-8"))
    assert sorted(_requests(tree)) == [("get", "f'{endpoint}/models'"), ("post", "f'{endpoint}/chat/completions'")]


def test_the_scan_would_catch_another_request() -> None:
    tree = ast.parse("self._session.post(f'{endpoint}/completions')\nsession.request('POST', url)")
    assert _requests(tree) == [("post", "f'{endpoint}/completions'"), ("request", "'POST'")]
