"""`Secret` and the one constant-time token lookup (`same_token`, `find_by_token`)."""

from __future__ import annotations

import hashlib

import pytest

from console_ha.secret import Secret, find_by_token, same_token


def test_a_secret_never_shows_itself_and_its_digest_is_its_sha256() -> None:
    secret = Secret("s3cret-token")
    assert "s3cret" not in repr(secret) and "s3cret" not in str(secret)
    assert secret.digest() == hashlib.sha256(b"s3cret-token").hexdigest()
    assert Secret("another").digest() != secret.digest()


@pytest.mark.parametrize("given, same", [("abc", True), ("abd", False), ("ab", False), ("ábc", False),
                                         (None, False), (b"abc", False), (1, False)])
def test_same_token_takes_only_the_same_ascii_text(given: object, same: bool) -> None:
    assert same_token("abc", given) is same


def test_find_by_token_finds_only_the_item_filed_under_that_exact_token() -> None:
    items = {"tok-1": "first", "tok-2": "second"}
    assert find_by_token(items, "tok-2") == "second"
    assert find_by_token(items, "tok-3") is None and find_by_token(items, "tök-1") is None
    assert find_by_token(items, None) is None and find_by_token({}, "tok-1") is None
