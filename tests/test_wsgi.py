"""The top-level `wsgi.py` serves the Console under a WSGI server of the household's choosing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.web.conftest import unused_port

REPO_ROOT = Path(__file__).resolve().parent.parent


def _get(url: str, host: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only, never a proxy
    try:
        with opener.open(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_waitress_serve_wsgi_app_answers_health_from_the_environment_data_dir(tmp_path: Path) -> None:
    """`waitress-serve wsgi:app` answers /health, uses CONSOLE_HA_DATA_DIR, and keeps the Host check."""
    data_dir = tmp_path / "data"
    port = unused_port()
    env = {**os.environ, "CONSOLE_HA_DATA_DIR": str(data_dir), "CONSOLE_HA_MDNS_INTERFACES": "127.0.0.1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "waitress", f"--listen=127.0.0.1:{port}", "--threads=22", "wsgi:app"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        status, body = 0, b""
        while time.monotonic() < deadline:
            try:
                status, body = _get(f"http://127.0.0.1:{port}/health")
                break
            except OSError:
                assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
                time.sleep(0.2)
        assert status == 200, body
        assert data_dir.is_dir() and (data_dir.stat().st_mode & 0o777) == 0o700
        assert _get(f"http://127.0.0.1:{port}/health", host="rebound.example")[0] == 400
    finally:
        process.terminate()
        process.wait(10)
