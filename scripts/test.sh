#!/usr/bin/env bash
# Install everything the tests need, then run them: the project's venv, Debian's Chromium for the
# browser tests, and Home Assistant's own venv for the real-instance suite. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

if ! command -v chromium >/dev/null 2>&1; then
    echo "Installing Debian's Chromium for the browser tests..."
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

# Debian's node and npm run the official MCP TypeScript SDK against the Console (tests/mcp/sdk_clients.py
# installs the SDK pinned by tests/mcp/ts_client/package-lock.json with `npm ci` the first time a test needs it).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "Installing Debian's node and npm for the MCP TypeScript SDK tests..."
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi

bash scripts/install-ha.sh

# Lint first: it takes a second and names the line.
.venv/bin/ruff check --quiet console_ha tests benchmarks wsgi.py plugins
# Then the type checker, strict for the package (its settings are in pyproject.toml's [tool.mypy]).
.venv/bin/python -m mypy
# And over the tests, the benchmarks and wsgi.py, not strictly (pyproject.toml's override for them): a test's
# helpers and fixtures need no annotations, but every body is checked, so a wrong call or a None is caught.
.venv/bin/python -m mypy tests benchmarks wsgi.py

exec .venv/bin/python -m pytest "$@"
