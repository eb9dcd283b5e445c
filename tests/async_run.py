"""Run a coroutine to its end from a synchronous test, whatever ran before it in the session."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run_to_end(coroutine: Coroutine[Any, Any, T]) -> T:
    """asyncio.run in a thread of its own: after the browser tests, Playwright's sync API keeps an event loop
    marked running in the main thread, where asyncio.run refuses to start another."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
