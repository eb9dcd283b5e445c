"""The hardened systemd unit in packaging/: it parses, and it keeps the promises docs/security-web.md makes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parents[1] / "packaging" / "console-ha.service"
INSTALLED_BINARY = "/opt/console-ha/venv/bin/console-ha"
DATA_DIR = "/var/lib/console-ha"


def _directives(text: str) -> dict[str, dict[str, list[str]]]:
    """Section → key → every value (systemd allows a key more than once), comments and blanks skipped."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"a directive before any section: {line}"
        key, sep, value = line.partition("=")
        assert sep, f"not a directive: {line}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


@pytest.fixture(scope="module")
def service() -> dict[str, list[str]]:
    return _directives(UNIT.read_text())["Service"]


@pytest.mark.parametrize(
    "key, value",
    [
        ("DynamicUser", "yes"),
        ("StateDirectory", "console-ha"),
        ("StateDirectoryMode", "0700"),
        ("ReadWritePaths", DATA_DIR),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("PrivateDevices", "yes"),
        ("NoNewPrivileges", "yes"),
        ("CapabilityBoundingSet", ""),
        ("AmbientCapabilities", ""),
        ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX AF_NETLINK"),
        ("RestrictNamespaces", "yes"),
        ("RestrictSUIDSGID", "yes"),
        ("LockPersonality", "yes"),
        ("MemoryDenyWriteExecute", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectKernelModules", "yes"),
        ("ProtectControlGroups", "yes"),
        ("SystemCallArchitectures", "native"),
        ("UMask", "0077"),
    ],
)
def test_the_unit_has_each_hardening_directive(service: dict[str, list[str]], key: str, value: str) -> None:
    """Each promise is one directive with exactly this value (an empty bounding set: no capabilities)."""
    assert service.get(key) == [value], key


def test_the_data_dir_is_the_only_writable_path_and_the_one_console_ha_uses(service: dict[str, list[str]]) -> None:
    """One ReadWritePaths entry, the state directory, which is also the --data-dir and CONSOLE_HA_DATA_DIR."""
    assert service["ReadWritePaths"] == [DATA_DIR]
    assert f"/var/lib/{service['StateDirectory'][0]}" == DATA_DIR
    assert service["Environment"] == [f"CONSOLE_HA_DATA_DIR={DATA_DIR}"]
    (exec_start,) = service["ExecStart"]
    assert exec_start.split() == [INSTALLED_BINARY, "serve", "--host", "127.0.0.1", "--port", "8000",
                                  "--data-dir", DATA_DIR]
    assert "User" not in service and "Group" not in service


def test_no_raw_or_packet_sockets_and_no_privileged_system_calls(service: dict[str, list[str]]) -> None:
    """The address families are listed positively; the system-call filter drops @privileged."""
    families = service["RestrictAddressFamilies"][0].split()
    assert "AF_PACKET" not in families and "~" not in service["RestrictAddressFamilies"][0]
    assert service["SystemCallFilter"] == ["@system-service", "~@privileged @resources"]


def _systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.skip("systemd-analyze is not installed here (Debian: the systemd package); the structural "
                    "checks above still ran")
    return found


def _installed_copy(tmp_path: Path, text: str | None = None) -> Path:
    # verify checks that ExecStart's program exists: point it at this checkout's console-ha.
    program = Path(sys.executable).with_name("console-ha")
    assert program.exists(), "console-ha is not installed in this venv (pip install -e .)"
    unit = tmp_path / "console-ha.service"
    unit.write_text((text or UNIT.read_text()).replace(INSTALLED_BINARY, str(program)))
    return unit


def _verify(unit: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_systemd_analyze(), "verify", "--man=no", str(unit)],
                          capture_output=True, text=True, timeout=60, check=False)


def test_systemd_analyze_verify_finds_nothing_to_say(tmp_path: Path) -> None:
    """systemd parses every line: no unknown key, no value it had to ignore (those are warnings, exit 0)."""
    result = _verify(_installed_copy(tmp_path))
    assert result.returncode == 0 and result.stderr.strip() == "" and result.stdout.strip() == "", (
        result.stdout + result.stderr)


def test_the_verify_check_catches_a_misspelt_directive(tmp_path: Path) -> None:
    """The check above can fail: systemd reports a typo that would silently drop a protection."""
    broken = UNIT.read_text().replace("ProtectSystem=strict", "ProtectSystm=strict")
    result = _verify(_installed_copy(tmp_path, broken))
    assert "Unknown key" in result.stderr


def test_systemd_rates_the_unit_well_hardened(tmp_path: Path) -> None:
    """`systemd-analyze security --offline` rates the exposure at most 2.0 of 10 ("OK")."""
    unit = _installed_copy(tmp_path)
    result = subprocess.run([_systemd_analyze(), "security", "--offline=yes", "--threshold=20", str(unit)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert "Overall exposure level" in result.stdout
