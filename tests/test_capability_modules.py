"""A read is its own module and a line in the registry: no capability module imports another, and what the
registry lists is what the translators' notes name (both read from syntax trees, as tests/test_layers.py does)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from console_ha.capabilities import registry
from console_ha.capabilities.registry import CAPABILITIES
from tests.test_catalogs import i18n
from tests.test_layers import imports_in

ROOT = Path(__file__).resolve().parent.parent


def capability_modules() -> list[str]:
    """The modules whose `CAPABILITY` the registry lists, by dotted name, in the registry's order."""
    modules = {module.CAPABILITY.name: module.__name__ for module in vars(registry).values()
               if isinstance(module, ModuleType) and getattr(module, "CAPABILITY", None) in CAPABILITIES}
    return [modules[capability.name] for capability in CAPABILITIES]


def reaches_between(root: Path, modules: Iterable[str]) -> list[str]:
    """Each import of one of `modules` by another of them (files under `root`), as "importer:line imports it"."""
    names = set(modules)
    files = [root.joinpath(*name.split(".")).with_suffix(".py") for name in sorted(names)]
    return [f"{found.importer}:{found.line} imports {found.imported}" for found in imports_in(root, files)
            if found.imported in names and found.imported != found.importer]


def test_every_registered_capability_has_a_module_of_its_own() -> None:
    modules = capability_modules()
    assert len(modules) == len(set(modules)) == len(CAPABILITIES)


def test_no_capability_module_imports_another() -> None:
    """What reads share is the contract's (spec, read_arguments, area_lookup, narrow, ...), never another read's."""
    assert reaches_between(ROOT, capability_modules()) == []


def test_the_check_finds_a_read_that_reaches_into_another(tmp_path: Path) -> None:
    """The guard above can fail: a private helper, a whole module or an attribute chain taken from a read."""
    package = tmp_path / "console_ha" / "capabilities"
    package.mkdir(parents=True)
    for name, text in {
        "__init__": "",
        "shared_part": "X = 1\n",
        "first_read": "from console_ha.capabilities.shared_part import X\n",
        "second_read": "from console_ha.capabilities.first_read import _helper\n",
        "third_read": "from console_ha.capabilities import first_read\n",
        "fourth_read": "import console_ha.capabilities.shared_part\nY = console_ha.capabilities.second_read.Z\n",
    }.items():
        (package / f"{name}.py").write_text(text, encoding="utf-8")
    reads = [f"console_ha.capabilities.{name}" for name in ("first_read", "second_read", "third_read", "fourth_read")]
    assert reaches_between(tmp_path, reads) == [
        "console_ha.capabilities.fourth_read:2 imports console_ha.capabilities.second_read",
        "console_ha.capabilities.second_read:1 imports console_ha.capabilities.first_read",
        "console_ha.capabilities.third_read:1 imports console_ha.capabilities.first_read",
    ]


def test_the_translators_notes_name_the_reads_the_registry_lists() -> None:
    """scripts/i18n.py reads the registry's syntax tree (it imports nothing of the package): the same reads."""
    assert i18n.card_modules() == tuple(name.rpartition(".")[2] for name in capability_modules())
