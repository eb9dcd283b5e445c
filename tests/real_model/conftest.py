"""The `llama_server` fixture: llama-cpp-python's OpenAI-compatible server on 127.0.0.1, with a tiny model.

The model is built by the test itself (random weights, tests/real_model/make_tiny_gguf.py); nothing is
downloaded. The first run compiles llama.cpp into <repo>/.cache/llama-venv (or $CONSOLE_HA_LLAMA_VENV),
see scripts/install-llama.sh; later runs reuse it. A developer can leave these tests out with
`-m "not real_model"`; CI runs them.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.web.conftest import unused_port

_HERE = Path(__file__).parent
REPO_ROOT = _HERE.parents[1]
INSTALL_SCRIPT = REPO_ROOT / "scripts" / "install-llama.sh"
# A first install compiles llama.cpp: about 10 minutes on two idle cores (docs/conversation.md).
INSTALL_TIMEOUT = 2400.0
START_TIMEOUT = 90.0
MODEL_ALIAS = "tiny-random"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/real_model as `real_model`, before `-m` deselects by marker."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.real_model)


@dataclass(frozen=True)
class LlamaServer:
    """A running llama-cpp-python server."""

    url: str  # the /v1 base URL
    model: str


def _install(venv: Path) -> Path:
    result = subprocess.run(["bash", str(INSTALL_SCRIPT), str(venv)], capture_output=True, text=True,
                            timeout=INSTALL_TIMEOUT, check=False)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-30:])
        pytest.fail(f"scripts/install-llama.sh exited {result.returncode}:\n{tail}")
    return venv / "bin" / "python"


# The tiny model's vocabulary is one token per byte, so a request costs a token per byte: the system prompt
# and the ten reads' tool definitions are about 12 KB when all are offered (tests/test_prompt_size.py keeps them
# within 12 KiB), past the 4,096 tokens this server had before issue 18.
N_CTX = 16384


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-cpp-python's server on a free loopback port, serving a freshly built tiny GGUF model."""
    venv = Path(os.environ.get("CONSOLE_HA_LLAMA_VENV") or REPO_ROOT / ".cache" / "llama-venv")
    python = _install(venv)
    work = tmp_path_factory.mktemp("llama")
    model = work / "tiny.gguf"
    subprocess.run([str(python), str(_HERE / "make_tiny_gguf.py"), str(model), str(N_CTX)], check=True, timeout=120)
    port = unused_port()
    log = (work / "server.log").open("wb")
    process = subprocess.Popen(
        [str(python), "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL_ALIAS,
         "--chat_format", "chatml", "--n_ctx", str(N_CTX), "--n_threads", "1", "--seed", "18",
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "NO_PROXY": "*"},
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"the llama server exited {process.returncode}:\n"
                            + (work / "server.log").read_text(errors="replace")[-3000:])
            try:
                if requests.get(f"{url}/models", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the llama server did not answer within {START_TIMEOUT:.0f} s")
            time.sleep(0.2)
        yield LlamaServer(url, MODEL_ALIAS)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        log.close()
