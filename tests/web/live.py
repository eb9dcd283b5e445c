"""A Console served for real on 127.0.0.1, and a browser-like HTTP client for it (requests, no JavaScript)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import requests
from flask import Flask
from werkzeug.serving import make_server

_CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


@dataclass
class Served:
    """A running Console: its app and its base URL (no trailing slash)."""

    app: Flask
    url: str

    def browser(self) -> Browser:
        """A new browser with its own cookie jar, sending the Console's own Origin on changes."""
        return Browser(self.url)


@contextmanager
def served(app: Flask) -> Iterator[Served]:
    """Serve `app` with werkzeug's threaded server on an ephemeral loopback port."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="served-console", daemon=True)
    thread.start()
    try:
        yield Served(app, f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class Browser:
    """What a browser does on the Console's pages: keeps cookies, reads the CSRF meta tag, sends Origin."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = requests.Session()

    def csrf(self, path: str = "/login") -> str:
        match = _CSRF_META.search(self.get(path).text)
        assert match, f"{path} carries no CSRF meta tag"
        return match.group(1)

    # The keyword arguments go through to requests as they are (data=, json=, headers=...).
    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.http.get(self.url + path, allow_redirects=False, timeout=10, **kwargs)

    def post(self, path: str, *, origin: str | None = "own", **kwargs: Any) -> requests.Response:
        headers: dict[str, str] = dict(kwargs.pop("headers", {}) or {})
        if origin is not None:
            headers["Origin"] = self.url if origin == "own" else origin
        return self.http.post(self.url + path, headers=headers, allow_redirects=False, timeout=10, **kwargs)

    def log_in(self, password: str) -> requests.Response:
        return self.post("/login", data={"password": password, "csrf_token": self.csrf("/login")})
