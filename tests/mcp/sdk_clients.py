"""MCP programs nobody here wrote: the official TypeScript SDK run by Debian's node, and a recording proxy.

The TypeScript SDK is pinned by `ts_client/package.json` and `package-lock.json` and installed with
`npm ci` the first time a test needs it (nothing is fetched when `node_modules` is already there).
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

TS_CLIENT_DIR = Path(__file__).parent / "ts_client"
NPM_CI_SECONDS = 300


def ts_sdk_installed() -> Path:
    """The TypeScript client's directory, with its pinned SDK installed (`npm ci`, once)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("Debian's node and npm are needed for the TypeScript SDK tests (apt-get install nodejs npm)")
    if not (TS_CLIENT_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").is_file():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=TS_CLIENT_DIR, check=True,
                       timeout=NPM_CI_SECONDS, stdout=subprocess.DEVNULL)
    return TS_CLIENT_DIR


@dataclass
class Program:
    """A running MCP program (either SDK); its output lines, read as they come."""

    process: subprocess.Popen[str]
    lines: list[dict[str, Any]] = field(default_factory=list)

    def next_result(self, timeout: float) -> dict[str, Any]:
        """The next line the program prints (a call's result, or `{"done": true}`)."""
        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        while True:
            left = deadline - time.monotonic()
            assert left > 0, "the program printed nothing in time"
            ready, _, _ = select.select([self.process.stdout], [], [], left)
            if ready:
                line = self.process.stdout.readline()
                assert line, f"the program ended: {self.stderr()}"
                self.lines.append(json.loads(line))
                return self.lines[-1]

    def kill(self) -> None:
        """Kill it as a user would a host that hangs: SIGKILL, its sockets closed by the system."""
        self.process.kill()
        self.process.wait(10)

    def stderr(self) -> str:
        if self.process.poll() is None:
            return "(still running)"
        return self.process.stderr.read() if self.process.stderr is not None else ""


# The two official SDKs: what each program is, and the patience its token gets in the tests. The
# TypeScript SDK keeps its default 60 s timeout, so its token keeps the default patience; the Python
# program gives up after 10 s, so its token waits 5 s (as one for Home Assistant's own client would).
SDKS = ("typescript", "python")
PY_CLIENT = Path(__file__).parent / "py_call_tool.py"


def start_program(sdk: str, mcp_url: str, token: str, tool: str, arguments: dict[str, Any],
                  max_calls: int = 5) -> Program:
    """Start a program on `sdk` that calls `tool` (again while told to come back), in its own process."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CONSOLE_HA_API_TOKEN": token}
    tail = [mcp_url, tool, json.dumps(arguments), str(max_calls)]
    if sdk == "typescript":
        command, cwd = ["node", "call_tool.mjs", *tail], ts_sdk_installed()
    else:
        command, cwd = [sys.executable, str(PY_CLIENT), *tail], Path(__file__).parent
        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return Program(process)


def ts_list_tools(mcp_url: str, token: str, timeout: float = 60) -> list[dict[str, Any]]:
    """The tools the TypeScript SDK's `listTools` gives a program, as it parsed them."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CONSOLE_HA_API_TOKEN": token}
    listed = subprocess.run(["node", "list_tools.mjs", mcp_url], cwd=ts_sdk_installed(), env=env, capture_output=True,
                            text=True, timeout=timeout, check=True)
    tools: list[dict[str, Any]] = json.loads(listed.stdout)
    return tools


_REQUEST_LINE = re.compile(rb"(GET|POST|PUT|PATCH|DELETE|HEAD) (\S+) HTTP/1\.[01]\r\n")


class RecordingProxy:
    """A loopback TCP proxy in front of Home Assistant that counts what the Console sends it.

    For the real Home Assistant, which keeps no request log a test can read and is read over WebSocket
    too: "nothing was read" is then "the Console sent Home Assistant nothing". HTTP request lines are
    noted as well.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.paths: list[str] = []
        self._sent = 0
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="recording-proxy").start()

    def sent(self) -> int:
        """How many bytes the Console has sent Home Assistant through the proxy (WebSocket frames included)."""
        with self._lock:
            return self._sent

    def requests_to(self, prefix: str) -> list[str]:
        """The request paths that start with `prefix`, in order."""
        with self._lock:
            return [p for p in self.paths if p.startswith(prefix)]

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target, timeout=30)
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, record: bool) -> None:
        seen = b""
        try:
            while data := source.recv(65536):
                if record:
                    with self._lock:
                        self._sent += len(data)
                    seen = (seen + data)[-8192:]
                    for match in _REQUEST_LINE.finditer(seen):
                        with self._lock:
                            self.paths.append(match.group(2).decode("latin-1"))
                    seen = seen[seen.rfind(b"\r\n") + 2:] if _REQUEST_LINE.search(seen) else seen
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
