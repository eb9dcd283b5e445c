#!/usr/bin/env bash
# Install a real Home Assistant core into its own venv, for the real_ha tests and benchmarks.
#
# usage: scripts/install-ha.sh [VENV_DIR]
#   VENV_DIR defaults to $CONSOLE_HA_HA_VENV, then to <repo>/.cache/ha-venv.
#   CONSOLE_HA_HA_PYTHON may name the Python 3.13 interpreter to build the venv from.
#
# Idempotent: a marker file records what was installed, and a venv that already holds these
# versions is left alone in well under a second. Home Assistant 2025.4.4 is the newest release
# that runs on this machine's Python 3.13.0 (see shared/notes/real-home-assistant.md).
set -euo pipefail

HA_VERSION="2025.4.4"
FRONTEND_VERSION="20250411.0"
UV_VERSION="0.6.10"
WANT="homeassistant==${HA_VERSION} home-assistant-frontend==${FRONTEND_VERSION} uv==${UV_VERSION}"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-${CONSOLE_HA_HA_VENV:-${repo_root}/.cache/ha-venv}}"
marker="${venv}/.console-ha-installed"

log() { printf 'install-ha: %s\n' "$*" >&2; }

already_installed() {
    [[ -f "${marker}" && -x "${venv}/bin/hass" ]] && [[ "$(cat "${marker}")" == "${WANT}" ]]
}

if already_installed; then
    log "Home Assistant ${HA_VERSION} already in ${venv}"
    exit 0
fi

find_python() {
    if [[ -n "${CONSOLE_HA_HA_PYTHON:-}" ]]; then
        printf '%s\n' "${CONSOLE_HA_HA_PYTHON}"
        return
    fi
    if command -v pyenv >/dev/null 2>&1; then
        local candidate
        candidate="$(pyenv root)/versions/3.13.0/bin/python3"
        if [[ -x "${candidate}" ]]; then
            printf '%s\n' "${candidate}"
            return
        fi
    fi
    if command -v python3.13 >/dev/null 2>&1; then
        # A pyenv shim needs to be told which 3.13 to run.
        PYENV_VERSION="${PYENV_VERSION:-3.13.0}" command -v python3.13
        return
    fi
    return 1
}

mkdir -p "$(dirname "${venv}")"
# Two test sessions starting at once must not build the same venv side by side.
exec 9>"${venv}.lock"
flock --timeout 900 9 || { log "timed out waiting for another install into ${venv}"; exit 1; }
if already_installed; then
    log "Home Assistant ${HA_VERSION} already in ${venv} (installed by another process)"
    exit 0
fi

python="$(find_python)" || { log "no Python 3.13 found (pyenv 3.13.0 or python3.13 on PATH)"; exit 1; }
export PYENV_VERSION="${PYENV_VERSION:-3.13.0}"
if ! "${python}" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))'; then
    log "${python} is not Python 3.13; Home Assistant ${HA_VERSION} needs >= 3.13.0"
    exit 1
fi

rm -f "${marker}"
if [[ -x "${venv}/bin/python" ]] && ! "${venv}/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))'; then
    log "removing ${venv}: it was built from another Python"
    rm -rf "${venv}"
fi
if [[ ! -x "${venv}/bin/python" ]]; then
    log "creating venv ${venv} from ${python}"
    "${python}" -m venv "${venv}"
fi

"${venv}/bin/python" -m pip install --quiet "uv==${UV_VERSION}"
uv="${venv}/bin/uv"

# Without compiled bytecode every start of Home Assistant takes twice as long, and this
# environment sets PYTHONDONTWRITEBYTECODE=1, so Python never writes it by itself.
log "installing homeassistant==${HA_VERSION} (no deps) to read its own pins"
"${uv}" pip install --quiet --compile-bytecode --python "${venv}/bin/python" --no-deps \
    "homeassistant==${HA_VERSION}"

constraints="$("${venv}/bin/python" - <<'EOF'
import importlib.util, pathlib
spec = importlib.util.find_spec("homeassistant")
print(pathlib.Path(spec.origin).parent / "package_constraints.txt")
EOF
)"
[[ -f "${constraints}" ]] || { log "no ${constraints} in the wheel"; exit 1; }

log "installing dependencies under ${constraints}"
"${uv}" pip install --quiet --compile-bytecode --python "${venv}/bin/python" \
    --constraint "${constraints}" \
    "homeassistant==${HA_VERSION}" "home-assistant-frontend==${FRONTEND_VERSION}"

"${venv}/bin/python" -c 'import homeassistant.const as c, hass_frontend; print(c.__version__)' \
    | grep -qx "${HA_VERSION}" || { log "installed Home Assistant does not report ${HA_VERSION}"; exit 1; }

printf '%s' "${WANT}" > "${marker}.tmp"
mv "${marker}.tmp" "${marker}"
log "Home Assistant ${HA_VERSION} installed in ${venv}"
