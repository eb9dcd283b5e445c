"""The `console-ha` command: serve the Console, set its password, manage API tokens, list plugins, forward MCP."""

from __future__ import annotations

import argparse
import getpass
import ipaddress
import logging
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING

from console_ha.errors import ConsoleHaError, InvalidSettingsChange
from console_ha.store.console_secrets import DEFAULT_PATIENCE_SECONDS, MAX_PATIENCE_SECONDS, MIN_PATIENCE_SECONDS
from console_ha.store.datadir import DataDir, resolve_data_dir

if TYPE_CHECKING:
    from console_ha.console import Console
    from console_ha.store.console_secrets import ConsoleSecrets

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_THREADS = 8


def _data_dir(args: argparse.Namespace) -> DataDir:
    return DataDir(resolve_data_dir(args.data_dir))


def _console(args: argparse.Namespace) -> Console:
    # Imported here so `console-ha mcp`, which only forwards, loads none of the Console.
    from console_ha.console import Console, ConsoleOptions
    from console_ha.ha.call_limits import CallCaps

    # `serve` opens the whole Console, which makes the data dir and sweeps what killed writes left behind.
    # Calls to Home Assistant may take all its threads but RESERVED_THREADS (docs/security.md).
    return Console.open(_data_dir(args), ConsoleOptions(call_caps=CallCaps.for_threads(args.threads)))


def _credentials(data_dir: DataDir) -> ConsoleSecrets:
    from console_ha.console import open_credentials

    # The password and API token commands sweep too, but make no data dir unless they write to it.
    return open_credentials(data_dir)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def server_threads(threads: int) -> int:
    """The WSGI server's worker threads: `--threads`, plus one for each that programs can hold at once.

    A call waiting for the household keeps its worker thread until the answer (MAX_WAITING of them), and a
    program's conversation message keeps one while the model thinks (MAX_PROGRAM_MESSAGES; its waiting read
    is also one of the first). With threads of their own, programs never take the ones kept for the pages
    or the Home Assistant calls (RESERVED_THREADS). Open pages' long polls for the waiting count
    (MAX_WATCHERS) have threads of their own too, so pages left open never hold the ones new pages need.
    """
    from console_ha.answers.household_queue import MAX_WAITING
    from console_ha.answers.page_watch import MAX_WATCHERS
    from console_ha.conversation.turn_loop import MAX_PROGRAM_MESSAGES

    return threads + MAX_WAITING + MAX_PROGRAM_MESSAGES + MAX_WATCHERS


# waitress keeps reading a connection while its request runs, so it sees a client that hung up (its
# `waitress.client_disconnected`): an MCP call whose program has gone is then detached from its card, and
# the household's later "Allow" reads nothing (docs/mcp.md, "Read only for a program that is there").
WAITRESS_OPTIONS = {"channel_request_lookahead": 1}


def serve(args: argparse.Namespace) -> int:
    """Run the Console on waitress until interrupted."""
    # Imported here so set-password and api-token start without loading Flask.
    # The package's own name for it (what tests replace); types-waitress declares it only in waitress.server.
    from waitress import create_server  # type: ignore[attr-defined]

    from console_ha.ha.call_limits import RESERVED_THREADS
    from console_ha.web import create_app
    from console_ha.web.security import listen_names

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.threads <= RESERVED_THREADS:
        raise InvalidSettingsChange(f"--threads must be at least {RESERVED_THREADS + 1}: {RESERVED_THREADS} are kept "
                            "for /health and the pages, whatever Home Assistant does.", field="threads")
    console = _console(args)
    names = [*listen_names(args.host), *args.trusted_host]
    app = create_app(test_config={"SESSION_COOKIE_SECURE": args.secure_cookies, "CONSOLE_HA_TRUSTED_HOSTS": names},
                     console=console)
    server = create_server(app, host=args.host, port=args.port, threads=server_threads(args.threads),
                           **WAITRESS_OPTIONS)
    port = server.effective_port
    host = f"[{args.host}]" if ":" in args.host else args.host
    if not _is_loopback(args.host):
        print(
            f"warning: listening on {args.host}: the Console is reachable from other devices, not only this "
            "one. Use a strong password, and serve it over https with --secure-cookies where you can.",
            file=sys.stderr,
            flush=True,
        )
    print(f"Console listening on http://{host}:{port}/", flush=True)
    print(f"Data dir: {console.data_dir.root}", flush=True)
    # The one place a household sees why a name it types is refused (400 UNTRUSTED_HOST).
    print(f"Answers to: {', '.join(str(n) for n in app.config['TRUSTED_HOSTS'])}", flush=True)
    if not console.secrets.has_password():
        print("No password yet: open the URL to set one, or run `console-ha set-password`.", flush=True)

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    # SIGTERM (systemd, a test) stops as cleanly as Ctrl-C does.
    signal.signal(signal.SIGTERM, stop)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        console.close()  # the plugins' worker ends with the server
    return 0


def _read_password() -> str:
    if not sys.stdin.isatty():
        # One line from a pipe or file: the password without its line ending.
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("New Console password: ")
    second = getpass.getpass("Repeat it: ")
    if first != second:
        raise InvalidSettingsChange("The two passwords are not the same; nothing was changed.", field="password")
    return first


def set_password(args: argparse.Namespace) -> int:
    """Set (or replace) the Console password; every browser session then has to log in again."""
    data_dir = _data_dir(args)
    secrets = _credentials(data_dir)
    password = _read_password()
    secrets.set_password(password)
    print(f"Password set for the Console at {data_dir.root}. Browsers logged in before must log in again.")
    return 0


def api_token_create(args: argparse.Namespace) -> int:
    """Print a new API token once; only its hash is kept."""
    data_dir = _data_dir(args)
    token = _credentials(data_dir).create_api_token(args.name, patience=args.patience)
    print(token, flush=True)
    # A Console reads only its own data dir's tokens: say which one this is, so a token made for another
    # Console (a missing --data-dir) is noticed now rather than as a 401 later.
    print(f"Made for the Console whose data dir is {data_dir.root}; a Console with another data dir "
          "will not accept it.", file=sys.stderr)
    print("Keep this token now: it is not shown again.", file=sys.stderr)
    return 0


def api_token_list(args: argparse.Namespace) -> int:
    """List the API tokens' names, creation and last-use times (never the tokens)."""
    for token in _credentials(_data_dir(args)).api_tokens():
        print(f"{token.created}  last used {token.last_used or 'never':20}  patience {token.patience:>3} s  "
              f"{token.name}")
    return 0


def api_token_revoke(args: argparse.Namespace) -> int:
    """Remove every API token with the given name."""
    removed = _credentials(_data_dir(args)).revoke_api_tokens(args.name)
    if not removed:
        print(f"No API token is named {args.name!r}.", file=sys.stderr)
        return 1
    print(f"Revoked {removed} API token(s) named {args.name!r}.")
    return 0


def plugins(args: argparse.Namespace) -> int:
    """List the installed plugins: each one's version, its hooks, whether the household turned it off, and the
    settings it declares with the household's values (as the plugins page shows them, credentials in a URL hidden)."""
    from console_ha.plugins.plugin_registry import Plugins, broken_plugins
    from console_ha.plugins.plugin_settings import PluginSettings
    from console_ha.store.plugin_switches import PluginSwitches
    from console_ha.store.plugin_values import PluginValuesFile

    data_dir = _data_dir(args)
    switches = PluginSwitches(data_dir)
    try:
        found = Plugins.installed(switches, PluginSettings(PluginValuesFile(data_dir)))
    except Exception:  # a plugin's import error, its hooks or settings declared wrongly: which plugin?
        broken = broken_plugins()
        if not broken:
            raise
        for one in broken:
            print(f"{one.name}  {one.version or 'no version'}  cannot be loaded: {one.error}")
        names = ", ".join(one.distribution or one.name for one in broken)
        print(f"The Console does not start while a plugin cannot be loaded: fix or uninstall {names}.",
              file=sys.stderr)
        return 1
    installed = found.describe()
    if not installed:
        print("No plugin is installed.")
    # A damaged file turns every plugin off (plugin_switches.py); the household turned none of them off.
    off = (f"off ({switches.path} cannot be read: every plugin is off until turned on on the plugins page)"
           if found.switches_unusable else "off (turned off by the household)")
    for plugin in installed:
        switch = "on" if plugin.on else off
        print(f"{plugin.name}  {plugin.version or 'no version'}  {switch}  hooks: {', '.join(plugin.hooks) or 'none'}")
        values = found.setting_values(plugin.name)
        for field in found.setting_fields(plugin.name):
            value = values.get(field.name)
            shown = ("not set" if value is None else
                     shown_address(value) if field.type == "url" else value)
            print(f"  {field.name} ({field.type}, \"{field.label('en')}\"): {shown}")
    return 0


def shown_address(url: str) -> str:
    """A URL setting as a terminal may show it: the user name, password and query, where a server's credentials go
    (`https://user:pass@ntfy.example/topic?auth=...`), each replaced by `***`; the rest as saved."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # a hand-edited file: nothing of it is shown
        return "*** (not an address)"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = ("***@" if parts.username is not None or parts.password is not None else "") + host
    netloc += f":{port}" if port is not None else ""
    return urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "", "***" if parts.fragment else ""))


def mcp(args: argparse.Namespace) -> int:
    """Forward MCP on stdio to a running Console's /mcp (token from CONSOLE_HA_API_TOKEN)."""
    # Imported here so the other commands start without loading the MCP SDK.
    from console_ha.mcp.stdio import log_to_stderr, run

    log_to_stderr()
    return run(args.url)


def build_parser() -> argparse.ArgumentParser:
    """The command line: serve, set-password, api-token create|list|revoke, plugins, mcp."""
    parser = argparse.ArgumentParser(prog="console-ha", description=__doc__)
    data_dir = argparse.ArgumentParser(add_help=False)
    data_dir.add_argument(
        "--data-dir", help="where the Console keeps its files (default: $CONSOLE_HA_DATA_DIR, else "
        "$XDG_DATA_HOME/console-ha or ~/.local/share/console-ha)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("serve", parents=[data_dir], help="run the Console")
    run.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    run.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free)")
    run.add_argument("--threads", type=int, default=DEFAULT_THREADS, help="worker threads (default 8)")
    run.add_argument(
        "--secure-cookies", action="store_true", help="mark the session cookie Secure (behind https only)"
    )
    run.add_argument(
        "--trusted-host", action="append", default=[], metavar="NAME",
        help="another host name the Console answers to, such as console.local (repeatable; also "
        "$CONSOLE_HA_TRUSTED_HOSTS, comma-separated). Loopback names and the --host address always are.",
    )
    run.set_defaults(handler=serve)

    password = commands.add_parser(
        "set-password", parents=[data_dir], help="set the Console password (from stdin when it is not a terminal)"
    )
    password.set_defaults(handler=set_password)

    tokens = commands.add_parser("api-token", help="API tokens for other programs")
    token_commands = tokens.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    create = token_commands.add_parser("create", parents=[data_dir], help="print a new token once")
    create.add_argument("--name", required=True, help="what the token is for")
    create.add_argument("--patience", type=int, default=DEFAULT_PATIENCE_SECONDS, metavar="SECONDS",
                        help=f"how long an MCP call waits for the household before it returns and asks the "
                             f"program to call again ({MIN_PATIENCE_SECONDS}-{MAX_PATIENCE_SECONDS}; default "
                             f"{DEFAULT_PATIENCE_SECONDS}, under the TypeScript SDK's 60 s; a few seconds for "
                             f"Home Assistant's own MCP client, which gives up after 10 s)")
    create.set_defaults(handler=api_token_create)
    listing = token_commands.add_parser("list", parents=[data_dir], help="list token names")
    listing.set_defaults(handler=api_token_list)
    revoke = token_commands.add_parser("revoke", parents=[data_dir], help="remove the tokens with a name")
    revoke.add_argument("--name", required=True)
    revoke.set_defaults(handler=api_token_revoke)

    listed = commands.add_parser(
        "plugins", parents=[data_dir],
        help="list the installed plugins, their versions, hooks and settings, and which are off"
    )
    listed.set_defaults(handler=plugins)

    forwarder = commands.add_parser(
        "mcp", help="an MCP server on stdio that forwards to a running Console (token: $CONSOLE_HA_API_TOKEN)"
    )
    forwarder.add_argument("--url", required=True, help="the Console's address, such as http://127.0.0.1:8000")
    forwarder.set_defaults(handler=mcp)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `console-ha`; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        status: int = args.handler(args)
        return status
    except ConsoleHaError as err:
        # Every error console-ha raises on purpose says what to do; a traceback would only hide it.
        print(f"console-ha: {err.message}", file=sys.stderr)
        return 2
