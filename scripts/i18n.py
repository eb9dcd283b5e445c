"""The household's words in catalogs: extract them, update each language's catalog, compile, check.

    python scripts/i18n.py extract   # console_ha/translations/messages.pot from babel.cfg's sources
    python scripts/i18n.py update    # each language's messages.po merged with the .pot (new ones empty)
    python scripts/i18n.py compile   # each messages.po into messages.mo (the build hook does this too)
    python scripts/i18n.py check     # exit 1 naming every message missing, stale or untranslated

Only Babel is needed (no console_ha import): the build hook (hatch_build.py) loads this file to compile.
The keywords are named here once: besides gettext's own, `Words` and `Words.counted` (console_ha/language.py).
"""

from __future__ import annotations

import ast
import io
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
CATALOGS = ROOT / "console_ha" / "translations"
TEMPLATE = CATALOGS / "messages.pot"
DOMAIN = "messages"
# Besides gettext's own: Words("…") and Words.counted("…", "…", n) (Babel's extractor sees the last name).
KEYWORDS = {**DEFAULT_KEYWORDS, "Words": None, "counted": (1, 2)}
# "Translators: …" comments beside a message reach its translators.
COMMENT_TAGS = ("Translators:",)
# The catalogs written by hand (or with care); the pseudo-language's is generated (scripts/pseudo_locale.py).
LANGUAGES = ("fr", "de", "es", "nl", "zh_Hans")
PSEUDO = "en_XA"
# The capabilities' registry: each module it lists writes its own card's words (console_ha/capabilities/<module>.py,
# one place each), and every message found there names its capability for translators, so a card reads as one.
REGISTRY = ROOT / "console_ha" / "capabilities" / "registry.py"


@cache
def card_modules(registry: Path = REGISTRY) -> tuple[str, ...]:
    """The capability modules the registry lists (`<module>.CAPABILITY` in `CAPABILITIES`), read from its syntax
    tree: a read added to the registry has its card named for translators, with no list here to keep."""
    for node in ast.parse(registry.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == "CAPABILITIES" and isinstance(node.value, ast.Tuple)):
            return tuple(entry.value.id for entry in node.value.elts
                         if isinstance(entry, ast.Attribute) and entry.attr == "CAPABILITY"
                         and isinstance(entry.value, ast.Name))
    raise ValueError(f"{registry} declares no `CAPABILITIES: tuple[...] = (...)`")


def card_comment(filename: str) -> list[str]:
    """The translators' note naming the capability whose card a message of `filename` belongs to, if any."""
    path = Path(filename)
    if path.parent.as_posix() != "console_ha/capabilities":
        return []
    if path.stem in card_modules():
        return [f"Translators: on the confirmation card of home_assistant.{path.stem}."]
    if path.stem == "cards":
        return ["Translators: on every confirmation card."]
    # A part the capability contract shares (recent_periods: the past hour, day or week).
    return [f"Translators: on the confirmation cards of the reads that share {path.stem}."]


def extract(root: Path = ROOT) -> Catalog:
    """Every household word in the sources babel.cfg names, as a catalog template."""
    with open(root / "babel.cfg", encoding="utf-8") as config:
        method_map, options_map = parse_mapping_cfg(config)
    catalog = Catalog(project="console-ha", msgid_bugs_address="", charset="utf-8")
    for filename, line, message, comments, context in extract_from_dir(
            root, method_map, options_map, keywords=KEYWORDS, comment_tags=COMMENT_TAGS, strip_comment_tags=True):
        catalog.add(message, None, [(filename, line)], auto_comments=[*card_comment(filename), *comments],
                    context=context)
    return catalog


def template_text(catalog: Catalog) -> bytes:
    """The .pot as written to the repository: no dates or line numbers, so an unchanged word changes nothing."""
    buffer = io.BytesIO()
    write_po(buffer, catalog, omit_header=True, include_lineno=False, sort_output=True, width=120)
    return buffer.getvalue()


def read_catalog(path: Path, locale: str | None = None) -> Catalog:
    """A .po or .pot file."""
    with open(path, "rb") as source:
        return read_po(source, locale=locale)


def po_path(language: str) -> Path:
    """Where a language's catalog is kept."""
    return CATALOGS / language / "LC_MESSAGES" / f"{DOMAIN}.po"


def write_catalog(path: Path, catalog: Catalog) -> None:
    """A .po as the repository keeps it: sorted, no line numbers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    write_po(buffer, catalog, include_lineno=False, sort_output=True, width=120, ignore_obsolete=True)
    path.write_bytes(buffer.getvalue())


def update() -> None:
    """Each language's catalog merged with the template: new messages empty (and `check` fails), old ones gone."""
    template = read_catalog(TEMPLATE)
    for language in LANGUAGES:
        catalog = read_catalog(po_path(language), language) if po_path(language).is_file() else Catalog(locale=language)
        created = catalog.creation_date
        catalog.update(template, no_fuzzy_matching=True)
        catalog.creation_date = created  # the .pot has no date (it would change with every extraction)
        catalog.project, catalog.version, catalog.msgid_bugs_address, catalog.fuzzy = "console-ha", "", "", False
        catalog.header_comment = f"# console-ha: the household's words in {language}; scripts/i18n.py keeps it whole.\n"
        write_catalog(po_path(language), catalog)


def catalogs() -> Iterator[Path]:
    """Every language's .po under the translations folder (the pseudo-language's too)."""
    yield from sorted(CATALOGS.glob(f"*/LC_MESSAGES/{DOMAIN}.po"))


def compile_all(root: Path = ROOT) -> list[Path]:
    """Compile every .po under `root`'s translations into its .mo; the .mo files written."""
    written = []
    for po in sorted((root / "console_ha" / "translations").glob(f"*/LC_MESSAGES/{DOMAIN}.po")):
        buffer = io.BytesIO()
        write_mo(buffer, read_catalog(po, po.parent.parent.name))
        mo = po.with_suffix(".mo")
        if not mo.is_file() or mo.read_bytes() != buffer.getvalue():
            mo.write_bytes(buffer.getvalue())
        written.append(mo)
    return written


def problems() -> list[str]:
    """What keeps the catalogs from being whole: a stale template, and per language each missing message."""
    found: list[str] = []
    fresh = extract()
    if not TEMPLATE.is_file() or template_text(fresh) != TEMPLATE.read_bytes():
        found.append("messages.pot is stale: run `python scripts/i18n.py extract` then `update`")
    wanted = {message.id for message in fresh if message.id}
    for language in (*LANGUAGES, PSEUDO):
        catalog = read_catalog(po_path(language), language)
        have = {message.id: message for message in catalog if message.id}
        for msgid in sorted(map(str, wanted - have.keys())):
            found.append(f"{language}: missing {msgid!r}")
        for msgid in sorted(map(str, have.keys() - wanted)):
            found.append(f"{language}: stale {msgid!r}")
        for msgid, message in have.items():
            strings = message.string if isinstance(message.string, tuple) else (message.string,)
            if msgid in wanted and (message.fuzzy or not all(strings)):
                found.append(f"{language}: untranslated {msgid!r}")
    return found


def main(argv: list[str]) -> int:
    """The command line above."""
    command = argv[1] if len(argv) > 1 else ""
    if command == "extract":
        TEMPLATE.write_bytes(template_text(extract()))
    elif command == "update":
        update()
    elif command == "compile":
        print("\n".join(str(path.relative_to(ROOT)) for path in compile_all()))
    elif command == "check":
        found = problems()
        print("\n".join(found) or "every message is translated in every language")
        return 1 if found else 0
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
