"""The catalogs stay whole: every message of the sources in every language, none stale, the pseudo-language fresh."""

from __future__ import annotations

import importlib.util
import io
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from babel.messages.mofile import write_mo

ROOT = Path(__file__).resolve().parent.parent


def _script(name: str) -> ModuleType:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "scripts"))


i18n = _script("i18n")
pseudo_locale = _script("pseudo_locale")


def test_every_message_of_the_sources_is_translated_in_every_language_and_none_is_stale() -> None:
    """A fresh extraction (babel.cfg over the package, templates and scripts) against the .pot and each .po."""
    assert i18n.problems() == []


def test_the_check_names_a_message_missing_from_a_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard above can fail: a new Words in the package is missing from the template and every catalog."""
    for name in ("babel.cfg",):
        (tmp_path / name).write_text((ROOT / name).read_text())
    (tmp_path / "console_ha").mkdir()
    (tmp_path / "console_ha" / "new.py").write_text('from console_ha.language import Words\nX = Words("A new word.")\n')
    monkeypatch.setattr(i18n, "ROOT", tmp_path)
    monkeypatch.setattr(i18n, "extract", lambda root=tmp_path: _real_extract(root))
    found = i18n.problems()
    assert "messages.pot is stale: run `python scripts/i18n.py extract` then `update`" in found
    assert "fr: missing 'A new word.'" in found and "zh_Hans: missing 'A new word.'" in found
    assert "de: stale 'Log in'" in found


_real_extract = i18n.extract


def test_the_pseudo_language_is_made_from_the_current_template() -> None:
    assert pseudo_locale.text() == i18n.po_path(pseudo_locale.CODE).read_bytes(), (
        "run `python scripts/pseudo_locale.py`")


def test_the_pseudo_language_is_accented_bracketed_and_40_percent_longer_with_placeholders_kept() -> None:
    text = pseudo_locale.pseudo("Wait {count} seconds, then try %(what)s again.")
    assert text.startswith("⟦") and text.endswith("⟧")
    assert "{count}" in text and "%(what)s" in text
    assert not re.search(r"[a-z]{2}", text.replace("{count}", "").replace("%(what)s", ""))
    assert len(text) - 2 >= 1.4 * len("Wait {count} seconds, then try %(what)s again.")


def test_placeholders_in_every_translation_are_those_of_its_message() -> None:
    placeholder = re.compile(r"%\([a-z_]+\)s|\{[a-z_]+\}")
    for language in (*i18n.LANGUAGES, i18n.PSEUDO):
        for message in i18n.read_catalog(i18n.po_path(language), language):
            if not message.id:
                continue
            ids = message.id if isinstance(message.id, tuple) else (message.id,)
            strings = message.string if isinstance(message.string, tuple) else (message.string,)
            wanted = set(placeholder.findall(ids[-1]))
            for string in strings:
                assert set(placeholder.findall(string)) == wanted, (language, ids[0], string)


def test_a_compiled_catalog_is_the_one_its_po_makes() -> None:
    """The .mo an install compiled is current: a .po edited since needs `python scripts/i18n.py compile`."""
    for po in i18n.catalogs():
        mo = po.with_suffix(".mo")
        if not mo.is_file():
            continue  # an install that never compiled: console_ha.language compiles in memory, and says so
        buffer = io.BytesIO()
        write_mo(buffer, i18n.read_catalog(po, po.parent.parent.name))
        assert mo.read_bytes() == buffer.getvalue(), f"{mo} is stale: run `python scripts/i18n.py compile`"
