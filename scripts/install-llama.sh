#!/usr/bin/env bash
# Install llama-cpp-python's OpenAI-compatible server into its own venv, for the real model-server check
# (tests/real_model). It compiles llama.cpp from source with the machine's cmake and g++.
#
# usage: scripts/install-llama.sh [VENV_DIR]
#   VENV_DIR defaults to $CONSOLE_HA_LLAMA_VENV, then to <repo>/.cache/llama-venv.
#
# Idempotent: a marker file records what was installed. Only the llama library is built (no multimodal
# library, no examples, no OpenMP, no CPU-specific tuning), which roughly halves the compile; pip keeps the
# built wheel in its cache, so a later venv on the same machine installs in seconds.
set -euo pipefail

LLAMA_VERSION="0.3.36"
GGUF_VERSION="0.19.0"
WANT="llama-cpp-python[server]==${LLAMA_VERSION} gguf==${GGUF_VERSION}"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-${CONSOLE_HA_LLAMA_VENV:-${repo_root}/.cache/llama-venv}}"
marker="${venv}/.console-ha-installed"

log() { printf 'install-llama: %s\n' "$*" >&2; }

already_installed() {
    [[ -f "${marker}" && -x "${venv}/bin/python" ]] && [[ "$(cat "${marker}")" == "${WANT}" ]]
}

if already_installed; then
    log "llama-cpp-python ${LLAMA_VERSION} already in ${venv}"
    exit 0
fi

mkdir -p "$(dirname "${venv}")"
exec 9>"${venv}.lock"
flock --timeout 2400 9 || { log "timed out waiting for another install into ${venv}"; exit 1; }
if already_installed; then
    exit 0
fi

rm -f "${marker}"
[[ -x "${venv}/bin/python" ]] || python3 -m venv "${venv}"
started=$(date +%s)
log "building llama-cpp-python ${LLAMA_VERSION} from source (several minutes on two cores)"
CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_CURL=OFF" \
    "${venv}/bin/python" -m pip install --quiet --disable-pip-version-check \
    "llama-cpp-python[server]==${LLAMA_VERSION}" "gguf==${GGUF_VERSION}"
printf '%s' "${WANT}" > "${marker}"
log "installed in $(( $(date +%s) - started )) s"
