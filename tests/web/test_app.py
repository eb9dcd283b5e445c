"""The app factory: no app at import time, the shared services, folders, blueprints, client reuse."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from flask import Flask

from console_ha import web
from console_ha.console import Console
from console_ha.ha.kept_clients import HomeAssistantClients
from console_ha.secret import Secret
from console_ha.store.datadir import DataDir
from console_ha.web import create_app

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_package_makes_no_app() -> None:
    """Only create_app makes one."""
    assert not any(isinstance(value, Flask) for value in vars(web).values())


def test_the_app_holds_its_services_in_one_extension(app: Flask, data_dir: DataDir) -> None:
    """Views reach the data dir and stores through app.extensions["console_ha"], not app.config."""
    services = app.extensions["console_ha"]
    assert isinstance(services, Console)
    assert services.data_dir == data_dir
    assert services.config_store.path == data_dir.ha_config
    assert {"auth", "settings_api", "pages", "conversation"} <= set(app.blueprints)


def test_a_checkout_serves_its_top_level_templates_and_static(app: Flask) -> None:
    """In the repository the folders are the top-level ones (a wheel carries copies under console_ha/_*)."""
    assert app.template_folder is not None and app.static_folder is not None
    assert Path(app.template_folder) == ROOT / "templates"
    assert Path(app.static_folder) == ROOT / "static"


def test_the_data_dir_defaults_to_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """create_app() without a data dir uses CONSOLE_HA_DATA_DIR."""
    monkeypatch.setenv("CONSOLE_HA_DATA_DIR", str(tmp_path / "from-env"))
    app = create_app(test_config={"TESTING": True})
    assert app.extensions["console_ha"].data_dir.root == tmp_path / "from-env"


def test_home_assistant_clients_are_kept_per_url_token_and_bundle(tmp_path: Path) -> None:
    """The same settings reuse one client; a new URL, token or CA file content makes a new one."""
    clients = HomeAssistantClients()
    first = clients("http://ha.local:8123", Secret("a"), None)
    assert clients("http://ha.local:8123", Secret("a"), None) is first
    second = clients("http://ha.local:8123", Secret("b"), None)
    assert second is not first
    assert clients("http://other.local:8123", Secret("b"), None) is not second
    bundle = tmp_path / "ca.pem"
    bundle.write_text("not really a certificate")
    with_bundle = clients("https://ha.local", Secret("b"), str(bundle))
    assert clients("https://ha.local", Secret("b"), str(bundle)) is with_bundle
    os.utime(bundle, (1, 1))
    assert clients("https://ha.local", Secret("b"), str(bundle)) is not with_bundle
