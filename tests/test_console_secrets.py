"""The Console's own secrets: password hash, API token hashes, the session key; private files only."""

from __future__ import annotations

import os
import stat
import threading
from datetime import UTC, datetime

import pytest

from console_ha.errors import ConsoleHaError, InvalidConfig
from console_ha.store.atomic import path_lock, sweep_temp_files
from console_ha.store.console_secrets import ConsoleSecrets, PasswordAlreadySet
from console_ha.store.datadir import DataDir
from console_ha.timestamps import utc_z
from tests.conftest import Clock

FAST = "pbkdf2:sha256:1000"


@pytest.fixture
def store(data_dir: DataDir) -> ConsoleSecrets:
    return ConsoleSecrets(data_dir)


def _modes(store: ConsoleSecrets) -> set[int]:
    return {stat.S_IMODE(p.stat().st_mode) for p in store.directory.iterdir()}


def test_no_password_before_the_first_run(store: ConsoleSecrets) -> None:
    """A fresh data dir has no password, and nothing verifies against it."""
    assert not store.has_password()
    assert store.verified_fingerprint("") is None
    assert store.password_fingerprint() is None


def test_the_password_is_kept_as_a_slow_salted_hash(store: ConsoleSecrets) -> None:
    """scrypt by default; two hashes of one password differ (salt); the text is never stored."""
    store.set_password("correct horse battery")
    first = store.password_hash()
    assert first is not None and first.startswith("scrypt:")
    assert "correct horse battery" not in store.password_path.read_text()
    assert store.verified_fingerprint("correct horse battery") is not None
    assert store.verified_fingerprint("correct horse batter") is None
    store.set_password("correct horse battery")
    assert store.password_hash() != first
    assert stat.S_IMODE(store.directory.stat().st_mode) == 0o700
    assert _modes(store) == {0o600}


@pytest.mark.parametrize("bad", ["short", "", "x" * 1025, None])
def test_weak_passwords_are_refused(store: ConsoleSecrets, bad: object) -> None:
    """Too short, too long, not text: InvalidConfig on the password field, nothing stored."""
    with pytest.raises(InvalidConfig) as caught:
        store.set_password(bad, method=FAST)  # type: ignore[arg-type]
    assert caught.value.detail["field"] == "password"
    assert not store.has_password()


def test_the_first_run_password_cannot_replace_one(store: ConsoleSecrets) -> None:
    """only_if_unset: a second first-run form loses."""
    store.set_password("the first one", only_if_unset=True, method=FAST)
    with pytest.raises(PasswordAlreadySet):
        store.set_password("the second one", only_if_unset=True, method=FAST)
    assert store.verified_fingerprint("the first one") is not None


def test_a_new_password_changes_the_fingerprint(store: ConsoleSecrets) -> None:
    """Sessions carry the fingerprint, so a new password ends them."""
    store.set_password("the first one", method=FAST)
    before = store.password_fingerprint()
    store.set_password("the second one", method=FAST)
    assert store.password_fingerprint() != before


def test_last_use_is_exact_to_the_minute_and_written_once_a_minute(data_dir: DataDir, clock: Clock) -> None:
    """The first use in each minute of the clock is written, later uses in that minute are not.

    The old rule (at most 60 s after the last write) kept 10:00 on the page after a use at 10:01:10.
    """
    store = ConsoleSecrets(data_dir, clock=clock)
    token = store.create_api_token("desk")
    clock.now = 1_800_000_030.0  # hh:mm:30
    store.verify_api_token(token)
    assert store.api_tokens()[0].last_used == utc_z(datetime.fromtimestamp(clock.now, UTC))
    written = store.api_tokens_path.stat().st_mtime_ns
    for step in (5, 10, 29):  # the same minute: no write
        clock.now = 1_800_000_030.0 + step
        store.verify_api_token(token)
    assert store.api_tokens_path.stat().st_mtime_ns == written
    clock.now = 1_800_000_070.0  # 40 s after the write, but the next minute
    store.verify_api_token(token)
    assert store.api_tokens()[0].last_used == utc_z(datetime.fromtimestamp(clock.now, UTC))


def test_an_api_token_is_shown_once_and_only_its_hash_is_kept(store: ConsoleSecrets) -> None:
    """The token verifies; the file holds its name, time and SHA-256, never the token."""
    token = store.create_api_token("home automation")
    assert token.startswith("cha_") and len(token) > 40
    assert token not in store.api_tokens_path.read_text()
    found = store.verify_api_token(token)
    assert found is not None and found.name == "home automation"
    assert len(found.digest) == 64
    assert store.verify_api_token(token + "x") is None
    assert store.verify_api_token("") is None
    assert _modes(store) == {0o600}


def test_several_tokens_verify_and_revoking_one_name_leaves_the_others(store: ConsoleSecrets) -> None:
    """Tokens are independent; revoke removes by name."""
    a = store.create_api_token("a")
    b = store.create_api_token("b")
    found = store.verify_api_token(a)
    assert found is not None and found.name == "a"
    found = store.verify_api_token(b)
    assert found is not None and found.name == "b"
    assert store.revoke_api_tokens("a") == 1
    assert store.verify_api_token(a) is None
    assert store.verify_api_token(b) is not None
    assert [t.name for t in store.api_tokens()] == ["b"]


@pytest.mark.parametrize("name", ["", "   ", "x" * 101, "tab\x00name"])
def test_a_token_needs_a_printable_name(store: ConsoleSecrets, name: str) -> None:
    """Refused before anything is made."""
    with pytest.raises(InvalidConfig):
        store.create_api_token(name)
    assert store.api_tokens() == []


def test_a_damaged_token_file_lets_no_token_in(store: ConsoleSecrets) -> None:
    """Unreadable means closed, not open."""
    token = store.create_api_token("a")
    store.api_tokens_path.write_text("{not json")
    assert store.verify_api_token(token) is None


def test_the_session_key_is_made_once_and_kept(data_dir: DataDir) -> None:
    """Stable across instances (processes): the same 32 bytes, in a 0600 file."""
    first = ConsoleSecrets(data_dir).session_key()
    assert len(first) == 32
    assert ConsoleSecrets(data_dir).session_key() == first
    assert stat.S_IMODE(ConsoleSecrets(data_dir).session_key_path.stat().st_mode) == 0o600


def test_concurrent_first_starts_agree_on_one_session_key(data_dir: DataDir) -> None:
    """Two threads making the key at once end up with the same key."""
    keys: list[bytes] = []
    threads = [threading.Thread(target=lambda: keys.append(ConsoleSecrets(data_dir).session_key()))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(keys)) == 1


def test_a_damaged_session_key_is_an_error_that_says_what_to_do(store: ConsoleSecrets) -> None:
    """A truncated key is not silently replaced (that would log everyone out unexplained)."""
    store.session_key()
    store.session_key_path.write_text("abcd\n")
    with pytest.raises(ConsoleHaError, match="remove it"):
        store.session_key()


# --- the data dir itself ---------------------------------------------------------------------------

import stat as stat_module  # noqa: E402
from pathlib import Path  # noqa: E402


def _mode(path: Path) -> int:
    return stat_module.S_IMODE(path.stat().st_mode)


def test_the_first_secret_creates_the_data_dir_0700(data_dir: DataDir) -> None:
    """Under the usual umask a new directory would be 0755; the data dir is 0700 from the start."""
    old = os.umask(0o022)
    try:
        ConsoleSecrets(data_dir).create_api_token("x")
    finally:
        os.umask(old)
    assert _mode(data_dir.root) == 0o700
    assert _mode(data_dir.root / "secrets") == 0o700


def test_an_existing_open_data_dir_is_narrowed_to_0700(data_dir: DataDir, caplog: pytest.LogCaptureFixture) -> None:
    """A directory made by hand (0755) is made 0700, and the log says so."""
    data_dir.root.mkdir(parents=True, mode=0o755)
    os.chmod(data_dir.root, 0o755)
    data_dir.ensure()
    assert _mode(data_dir.root) == 0o700
    assert "is now 700" in caplog.text


def test_the_app_keeps_the_data_dir_0700(data_dir: DataDir) -> None:
    """create_app makes (or narrows) the data dir before anything is written into it."""
    from console_ha.web import create_app

    data_dir.root.mkdir(parents=True)
    os.chmod(data_dir.root, 0o777)
    create_app(data_dir, {"TESTING": True})
    assert _mode(data_dir.root) == 0o700


def test_a_data_dir_this_user_cannot_narrow_is_an_error_that_says_so(
    data_dir: DataDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone else's open directory: console-ha says what to do rather than running in it."""
    data_dir.root.mkdir(parents=True)
    os.chmod(data_dir.root, 0o755)

    def refuse(*args: object) -> None:
        raise PermissionError("not the owner")

    monkeypatch.setattr("console_ha.store.datadir.os.chmod", refuse)
    with pytest.raises(ConsoleHaError, match="open to other users"):
        data_dir.ensure()


def test_leftover_temporary_files_are_swept_when_the_app_starts(data_dir: DataDir) -> None:
    """A crash mid-write can leave `.session-key.*.tmp` (a full copy of the key): gone at the next start.

    The one sweep (atomic.sweep_temp_files, from settings.recover) serves secrets/console too.
    """
    from console_ha.web import create_app

    store = ConsoleSecrets(data_dir)
    store.session_key()
    stale = store.directory / ".session-key.ab12cd34.tmp"
    stale.write_text("00" * 32)
    other = store.directory / ".api-tokens.json.ef_56789.tmp"
    other.write_text("{}")
    create_app(data_dir, {"TESTING": True})
    assert not stale.exists()
    assert not other.exists()
    assert store.session_key_path.exists()


def test_a_write_in_progress_is_not_swept(data_dir: DataDir) -> None:
    """A temporary file whose writer still holds the target's lock is left to that writer."""
    store = ConsoleSecrets(data_dir)
    store.session_key()
    target = store.api_tokens_path
    in_progress = store.directory / ".api-tokens.json.gh78ij90.tmp"
    swept: list[list[Path]] = []
    with path_lock(target):
        in_progress.write_text("{}")
        sweeper = threading.Thread(target=lambda: swept.append(sweep_temp_files(data_dir.root)))
        sweeper.start()
        sweeper.join(0.5)
        assert sweeper.is_alive(), "the sweep must wait for the writer's lock"
        assert in_progress.exists()
        os.replace(in_progress, target)  # the writer finishes as atomic_write does
    sweeper.join(10)
    assert swept == [[]]
    assert target.read_text() == "{}"
