"""The `console-ha` command: set-password, api-token, and serve over real HTTP on 127.0.0.1."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import waitress

from console_ha import cli
from console_ha.answers.household_queue import MAX_WAITING
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.web import create_app
from tests.moving_clock import PATIENCE

API = "/api/v1/conversation/home-assistant"
PROGRAM_API = "/api/v1/confirmations"


class _Stdin(io.StringIO):
    def __init__(self, text: str, tty: bool = False) -> None:
        super().__init__(text)
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_set_password_reads_stdin_when_it_is_not_a_terminal(
    data_dir: DataDir, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line from a pipe, without its newline, becomes the password."""
    monkeypatch.setattr(sys, "stdin", _Stdin("piped password\n"))
    assert cli.main(["set-password", "--data-dir", str(data_dir.root)]) == 0
    assert ConsoleSecrets(data_dir).verified_fingerprint("piped password") is not None
    output = capsys.readouterr()
    assert "Password set" in output.out and "piped password" not in output.out + output.err


def test_set_password_uses_the_data_dir_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --data-dir: CONSOLE_HA_DATA_DIR."""
    monkeypatch.setenv("CONSOLE_HA_DATA_DIR", str(tmp_path / "env-data"))
    monkeypatch.setattr(sys, "stdin", _Stdin("from the env dir\n"))
    assert cli.main(["set-password"]) == 0
    assert ConsoleSecrets(DataDir(tmp_path / "env-data")).has_password()


def test_a_short_password_is_refused_with_exit_status_2(
    data_dir: DataDir, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reason on stderr; nothing stored."""
    monkeypatch.setattr(sys, "stdin", _Stdin("short\n"))
    assert cli.main(["set-password", "--data-dir", str(data_dir.root)]) == 2
    assert "at least 8" in capsys.readouterr().err
    assert not ConsoleSecrets(data_dir).has_password()


def test_on_a_terminal_the_password_is_asked_twice(data_dir: DataDir, monkeypatch: pytest.MonkeyPatch) -> None:
    """getpass twice; two different answers change nothing."""
    monkeypatch.setattr(sys, "stdin", _Stdin("", tty=True))
    answers = iter(["first answer", "second answer"])
    monkeypatch.setattr("console_ha.cli.getpass.getpass", lambda prompt: next(answers))
    assert cli.main(["set-password", "--data-dir", str(data_dir.root)]) == 2
    assert not ConsoleSecrets(data_dir).has_password()
    answers = iter(["same answer", "same answer"])
    assert cli.main(["set-password", "--data-dir", str(data_dir.root)]) == 0
    assert ConsoleSecrets(data_dir).verified_fingerprint("same answer") is not None


def test_api_token_create_prints_a_token_that_authenticates(
    data_dir: DataDir, capsys: pytest.CaptureFixture[str]
) -> None:
    """stdout is the token alone, once; stderr names the data dir; it opens the API; list names it, not the token."""
    assert cli.main(["api-token", "create", "--name", "node-red", "--data-dir", str(data_dir.root)]) == 0
    output = capsys.readouterr()
    token = output.out.strip()
    assert output.out.count("\n") == 1 and token.startswith("cha_")
    assert "not shown again" in output.err
    assert f"data dir is {data_dir.root}" in output.err  # which Console it is for

    client = create_app(data_dir, {"TESTING": True}).test_client()
    # What a program's token may read: its own cards waiting for the household.
    assert client.get(PROGRAM_API, headers={"Authorization": f"Bearer {token}"}).status_code == 200

    assert cli.main(["api-token", "list", "--data-dir", str(data_dir.root)]) == 0
    listing = capsys.readouterr().out
    assert "node-red" in listing and token not in listing

    assert cli.main(["api-token", "revoke", "--name", "node-red", "--data-dir", str(data_dir.root)]) == 0
    assert client.get(PROGRAM_API, headers={"Authorization": f"Bearer {token}"}).status_code == 401
    assert cli.main(["api-token", "revoke", "--name", "node-red", "--data-dir", str(data_dir.root)]) == 1


def test_serve_warns_when_listening_beyond_this_device(
    data_dir: DataDir, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A non-loopback host is allowed, with a warning (the server itself is faked: nothing is bound)."""
    seen: dict[str, Any] = {}

    class FakeServer:
        effective_port = 8000

        def run(self) -> None:
            raise KeyboardInterrupt

        def close(self) -> None:
            seen["closed"] = True

    def create_server(app: Any, **kwargs: Any) -> FakeServer:
        seen.update(kwargs)
        return FakeServer()

    from console_ha.console import Console

    monkeypatch.setattr(waitress, "create_server", create_server)
    monkeypatch.setattr("console_ha.cli.signal.signal", lambda *args: None)
    opened_close = Console.close
    monkeypatch.setattr(Console, "close", lambda self: (seen.update(console_closed=True), opened_close(self))[1])
    assert cli.main(["serve", "--host", "192.0.2.10", "--threads", "4", "--data-dir", str(data_dir.root)]) == 0
    assert seen.pop("console_closed")  # the plugins' worker ends with the server
    output = capsys.readouterr()
    assert "warning: listening on 192.0.2.10" in output.err
    assert "http://192.0.2.10:8000/" in output.out
    # --threads 4 for the pages and Home Assistant calls, plus one for each thread programs may hold.
    # waitress keeps reading each connection, so a client that hung up is seen (cli.WAITRESS_OPTIONS).
    assert seen == {"host": "192.0.2.10", "port": 8000, "threads": cli.server_threads(4), "closed": True,
                    "channel_request_lookahead": 1}


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("::1", True), ("localhost", True),
                                             ("0.0.0.0", False), ("192.168.1.2", False)])
def test_which_hosts_count_as_this_device(host: str, loopback: bool) -> None:
    """Only loopback addresses stay on this device."""
    assert cli._is_loopback(host) is loopback


def test_serve_answers_health_over_real_http_and_stops_on_sigterm(data_dir: DataDir) -> None:
    """`python -m console_ha serve --port 0` prints its URL and data dir, answers /health, exits on SIGTERM."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "console_ha", "serve", "--host", "127.0.0.1", "--port", "0",
         "--data-dir", str(data_dir.root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    assert process.stdout is not None and process.stderr is not None  # both PIPE: Popen has made them
    try:
        url_line = process.stdout.readline()
        dir_line = process.stdout.readline()
        assert url_line.startswith("Console listening on http://127.0.0.1:"), url_line + process.stderr.read()
        assert dir_line.strip() == f"Data dir: {data_dir.root}"
        url = url_line.split()[-1]
        with urllib.request.urlopen(url + "health", timeout=5) as response:
            assert json.load(response) == {"status": "ok"}
            assert response.headers["Content-Security-Policy"]
        request = urllib.request.Request(url + API.lstrip("/"))
        try:
            urllib.request.urlopen(request, timeout=5)
        except urllib.error.HTTPError as err:
            assert err.code == 401
        else:
            pytest.fail("the API answered without authentication")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()


def test_python_dash_m_shows_the_commands() -> None:
    """`python -m console_ha --help` lists serve, set-password and api-token, and ends (a serve would not)."""
    result = subprocess.run([sys.executable, "-m", "console_ha", "--help"], capture_output=True, text=True,
                            timeout=PATIENCE, check=False)
    assert result.returncode == 0
    for command in ("serve", "set-password", "api-token"):
        assert command in result.stdout


def test_serve_with_a_damaged_session_key_says_what_to_do_without_a_traceback(tmp_path, capsys):
    from console_ha.cli import main
    from console_ha.store.console_secrets import ConsoleSecrets
    from console_ha.store.datadir import DataDir

    secrets = ConsoleSecrets(DataDir(tmp_path))
    secrets.session_key_path.parent.mkdir(parents=True)
    secrets.session_key_path.write_text("zz\n")
    assert main(["serve", "--data-dir", str(tmp_path), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "damaged" in err and "Traceback" not in err


def _start_serving(data_dir: DataDir, *args: str,
                   env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "console_ha", "serve", "--host", "127.0.0.1", "--port", "0",
         "--data-dir", str(data_dir.root), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    assert process.stdout is not None and process.stderr is not None  # both PIPE: Popen has made them
    url_line = process.stdout.readline()
    assert url_line.startswith("Console listening on http://127.0.0.1:"), url_line + process.stderr.read()
    return process, url_line.split()[-1]


def _stop(process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None and process.stderr is not None  # _start_serving made both pipes
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    process.stdout.close()
    process.stderr.close()


def _status_for_host(url: str, host: str) -> int:
    import http.client

    address, port = url.removeprefix("http://").rstrip("/").split(":")
    connection = http.client.HTTPConnection(address, int(port), timeout=5)
    try:
        connection.putrequest("GET", "/health", skip_host=True)
        connection.putheader("Host", host)
        connection.endheaders()
        return connection.getresponse().status
    finally:
        connection.close()


def test_serve_answers_its_trusted_host_names_and_refuses_others_over_real_http(data_dir: DataDir) -> None:
    """--trusted-host and CONSOLE_HA_TRUSTED_HOSTS add names; any other Host gets 400; the names are printed."""
    process, url = _start_serving(data_dir, "--trusted-host", "console.local", "--trusted-host", "den.home.arpa",
                                  env={"CONSOLE_HA_TRUSTED_HOSTS": "kitchen.local"})
    assert process.stdout is not None  # _start_serving made the pipe
    try:
        process.stdout.readline()  # the data dir
        answers = process.stdout.readline()
        assert answers.strip() == "Answers to: localhost, 127.0.0.1, [::1], console.local, den.home.arpa, kitchen.local"
        port = url.rstrip("/").rsplit(":", 1)[1]
        for host in ("console.local", f"console.local:{port}", "den.home.arpa", "kitchen.local", f"127.0.0.1:{port}"):
            assert _status_for_host(url, host) == 200, host
        for host in ("evil.example", f"evil.example:{port}", "console.local.evil.example"):
            assert _status_for_host(url, host) == 400, host
    finally:
        _stop(process)


def test_serve_refuses_a_trusted_host_that_is_a_url(data_dir: DataDir, capsys: pytest.CaptureFixture[str]) -> None:
    """`--trusted-host http://console.local` could never match: exit 2 with the reason."""
    assert cli.main(["serve", "--data-dir", str(data_dir.root), "--port", "0",
                     "--trusted-host", "http://console.local"]) == 2
    assert "not a host name" in capsys.readouterr().err


def test_set_password_makes_a_new_data_dir_0700(
    data_dir: DataDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first command run on a device creates the data dir closed to other users."""
    import stat

    monkeypatch.setattr(sys, "stdin", _Stdin("piped password\n"))
    assert cli.main(["set-password", "--data-dir", str(data_dir.root)]) == 0
    assert stat.S_IMODE(data_dir.root.stat().st_mode) == 0o700


def test_what_programs_can_hold_gets_worker_threads_of_their_own() -> None:
    """Programs hold threads two ways at once, each bounded: MCP calls waiting for the household (MAX_WAITING) and
    messages while the model thinks (MAX_PROGRAM_MESSAGES; a message's waiting read also counts in the first).
    Open pages' long polls of the waiting count (MAX_WATCHERS) hold threads too, and have their own.
    The server has a thread for each beyond --threads, so even --threads 3 keeps its two for the pages."""
    from console_ha.answers.page_watch import MAX_WATCHERS
    from console_ha.cli import server_threads
    from console_ha.conversation.turn_loop import MAX_PROGRAM_MESSAGES

    assert server_threads(3) == 3 + MAX_WAITING + MAX_PROGRAM_MESSAGES + MAX_WATCHERS


def test_every_thread_count_the_docs_give_another_server_is_the_one_serve_runs() -> None:
    """The count is `cli.server_threads`'s; README, wsgi.py and the docs that state it must not drift from it."""
    import re

    from console_ha.cli import DEFAULT_THREADS, server_threads

    root = Path(__file__).resolve().parent.parent
    stated = {(name, int(n)) for name in ("README.md", "wsgi.py", "docs/security.md", "docs/mcp.md", "docs/web.md")
              for n in re.findall(r"--threads=(\d+)", (root / name).read_text(encoding="utf-8"))}
    assert {name for name, _ in stated} >= {"README.md", "wsgi.py", "docs/security.md"}
    assert {n for _, n in stated} == {server_threads(DEFAULT_THREADS)}


def test_commands_that_only_list_or_refuse_leave_the_data_dir_as_they_found_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`api-token list`, a revoke of no token and a refused password make no data dir, nor narrow one.

    As before the composition root: only a command that writes (a password, a token, `serve`) makes it.
    """
    import stat

    mistyped = tmp_path / "mistyped" / "data"
    assert cli.main(["api-token", "list", "--data-dir", str(mistyped)]) == 0
    assert cli.main(["api-token", "revoke", "--name", "node-red", "--data-dir", str(mistyped)]) == 1
    monkeypatch.setattr(sys, "stdin", _Stdin("short\n"))
    assert cli.main(["set-password", "--data-dir", str(mistyped)]) == 2
    assert not (tmp_path / "mistyped").exists()

    shared = tmp_path / "made-by-hand"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    assert cli.main(["api-token", "list", "--data-dir", str(shared)]) == 0
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755
    assert "No API token is named" in capsys.readouterr().err


def test_every_command_sweeps_what_a_killed_write_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Listing the API tokens still repairs the data dir first, as every command did."""
    data_dir = DataDir(tmp_path / "data")
    data_dir.ensure()
    stale = data_dir.root / ".ha.json.ab12cd34.tmp"
    stale.write_text("a copy of what a killed write was writing")
    assert cli.main(["api-token", "list", "--data-dir", str(data_dir.root)]) == 0
    assert not stale.exists()


def test_plugins_lists_each_installed_plugin_with_its_version_hooks_and_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two real distributions under the entry point group; the one the household turned off says so."""
    from console_ha.store.plugin_switches import PluginSwitches
    from tests.tiny_plugin import install_plugin

    data_dir = DataDir(tmp_path / "data")
    site = tmp_path / "site"
    install_plugin(site, monkeypatch, name="quiet_hours_test", version="0.3.0", source="""
        from console_ha.hooks import hookimpl

        @hookimpl
        def before_toolcall(capability):
            return None
    """)
    install_plugin(site, monkeypatch, name="notify_test", version="2.0.1", source="""
        from console_ha.hooks import hookimpl

        @hookimpl
        def on_card(event):
            return None

        @hookimpl
        def on_input(message):
            return None
    """)
    PluginSwitches(data_dir).set_on("notify_test", False, ["notify_test", "quiet_hours_test"])

    assert cli.main(["plugins", "--data-dir", str(data_dir.root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "notify_test  2.0.1  off (turned off by the household)  hooks: on_input, on_card" in lines
    assert "quiet_hours_test  0.3.0  on  hooks: before_toolcall" in lines


def test_plugins_says_the_switches_file_is_damaged_not_that_the_household_turned_them_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A switches file damaged by hand turns every plugin off; the list says why, and names no false cause."""
    from tests.tiny_plugin import install_plugin

    data_dir = DataDir(tmp_path / "data")
    install_plugin(tmp_path / "site", monkeypatch, name="notify_test", version="2.0.1", source="""
        from console_ha.hooks import hookimpl

        @hookimpl
        def on_card(event):
            return None
    """)
    data_dir.plugin_switches.parent.mkdir(parents=True)
    data_dir.plugin_switches.write_text('{"turned_off": "notify_test"')

    assert cli.main(["plugins", "--data-dir", str(data_dir.root)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith("notify_test  2.0.1  off (") and "by the household" not in line
    assert f"{data_dir.plugin_switches} cannot be read: every plugin is off" in line


@pytest.mark.parametrize("source, error", [
    ("import not_there_at_all\n", "ModuleNotFoundError: No module named 'not_there_at_all'"),
    ("raise RuntimeError('no config')\n", "RuntimeError: no config"),
    ("from console_ha.hooks import hookimpl\n\n@hookimpl\ndef on_card(evnt):\n    return None\n",
     "PluginValidationError"),
    ("CONSOLE_HA_SETTINGS = [{'name': 'url'}]\n", "InvalidDeclaration"),
])
def test_plugins_names_a_plugin_that_cannot_be_loaded_and_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], source: str, error: str
) -> None:
    """The command the household runs when the Console will not start: the broken plugin named, not a traceback."""
    from tests.tiny_plugin import install_plugin

    install_plugin(tmp_path / "site", monkeypatch, name="broken_test", version="0.1.0", source=source)
    install_plugin(tmp_path / "site", monkeypatch, name="fine_test", version="1.0.0", source="")

    assert cli.main(["plugins", "--data-dir", str(tmp_path / "data")]) == 1
    out, err = capsys.readouterr()
    [line] = out.splitlines()
    assert line.startswith(f"broken_test  0.1.0  cannot be loaded: {error}")
    assert "The Console does not start" in err and "broken_test" in err and "Traceback" not in out + err


def test_plugins_says_when_none_is_installed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without a plugin: one line that says so, and no data dir made."""
    assert cli.main(["plugins", "--data-dir", str(tmp_path / "data")]) == 0
    assert capsys.readouterr().out == "No plugin is installed.\n"
    assert not (tmp_path / "data").exists()


def test_plugins_shows_each_declared_setting_with_its_value_and_no_credentials_of_an_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the plugins page: each setting's name, type, label and value (or "not set"); a URL's user, password and
    query, where a server's credentials go, never printed."""
    from console_ha.store.plugin_values import PluginValuesFile
    from tests.tiny_plugin import install_plugin

    data_dir = DataDir(tmp_path / "data")
    install_plugin(tmp_path / "site", monkeypatch, name="notify_cli", version="1.0.0", source="""
        from console_ha.hooks import hookimpl

        CONSOLE_HA_SETTINGS = [
            {"name": "url", "type": "url", "label": {"en": "Send to", "fr": "Envoyer à"}},
            {"name": "start", "type": "time", "label": "Quiet from"},
            {"name": "topic", "type": "text", "label": "Topic"},
        ]

        @hookimpl
        def on_card(event):
            return None
    """)
    PluginValuesFile(data_dir).save("notify_cli", {
        "url": "https://phone:hunter2-secret@ntfy.example:8443/console-topic?auth=tk_secret#frag", "start": "22:00"})

    assert cli.main(["plugins", "--data-dir", str(data_dir.root)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "notify_cli  1.0.0  on  hooks: on_card",
        '  url (url, "Send to"): https://***@ntfy.example:8443/console-topic?***#***',
        '  start (time, "Quiet from"): 22:00',
        '  topic (text, "Topic"): not set',
    ]
    assert "hunter2" not in out and "tk_secret" not in out and "phone" not in out


@pytest.mark.parametrize("url, shown", [
    ("https://ntfy.example/console", "https://ntfy.example/console"),
    ("http://[::1]:8123/api/webhook/abc", "http://[::1]:8123/api/webhook/abc"),
    ("https://user@host.example/t?x=1", "https://***@host.example/t?***"),
    ("https://host.example:99999/t", "*** (not an address)"),
])
def test_an_address_is_shown_without_what_may_hold_credentials(url: str, shown: str) -> None:
    assert cli.shown_address(url) == shown
