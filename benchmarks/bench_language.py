"""A page in another language renders within 1.05x of the same page in English (issue 26).

Run on demand from the repository root (it is not a test):

    .venv/bin/python benchmarks/bench_language.py            # 400 requests of each page in each language
    .venv/bin/python benchmarks/bench_language.py --quick    # 60 of each

The Console is served by waitress on a thread (loopback only). Three pages, each asked for in English and in
French (and Chinese) by its `Accept-Language`, the languages in a seeded random order within each round, so
the machine's drift falls on all alike: the login page (no session), the Settings page (the household's
session: navigation, the Language choice), and Activity with 200 events (a Babel date per event). The
catalogs are loaded before the first timed request (once per process, as the Console does at its first
request in a language). Printed: each page's median per language, and the ratio of another language's
median to English's, against 1.05x; and the paired ratio (median of per-round ratios).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _measure import Figure, household_session, median, ms, serve_wsgi

from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.web import create_app

LANGUAGES = {"en": "en-US,en;q=0.9", "fr": "fr-FR,fr;q=0.9", "zh-Hans": "zh-CN,zh;q=0.9"}
PAGES = ("/login", "/settings/home-assistant", "/activity")
EVENTS = 200
TARGET = 1.05


def _console(root: Path) -> str:
    """A data dir with the household's password and `EVENTS` Activity lines, a minute apart."""
    from tests.web.conftest import FAST_HASH, PASSWORD

    data_dir = DataDir(root)
    ConsoleSecrets(data_dir).set_password(PASSWORD, method=FAST_HASH)
    audit = AuditLog(data_dir)
    for index in range(EVENTS):
        audit.record(AuditEvent.PROPOSED, capability="home_assistant.list_entities", classification="read", stage=1,
                     invocation=f"i{index}")
    lines = [json.loads(line) for line in data_dir.audit_log.read_text().splitlines()]
    data_dir.audit_log.write_text("".join(
        json.dumps({**line, "time": f"2026-12-02T{9 + index // 60:02d}:{index % 60:02d}:00Z"}) + "\n"
        for index, line in enumerate(lines)))
    return str(root)


def main(argv: list[str] | None = None) -> int:
    """Measure and print; exit 1 when a language misses the target on a page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args(argv)
    rounds = args.rounds or (60 if args.quick else 400)
    random.seed(26)
    with tempfile.TemporaryDirectory() as root:
        app = create_app(DataDir(Path(_console(Path(root)))), {"TESTING": False})
        with serve_wsgi(app) as url:
            household = household_session(url, trust_env=False)
            # The login page is for a browser without a session (with one, it leads on to the Console).
            anonymous = requests.Session()
            anonymous.trust_env = False
            sessions = {"/login": anonymous, "/settings/home-assistant": household, "/activity": household}
            times: dict[tuple[str, str], list[float]] = {}
            for page in PAGES:
                for header in LANGUAGES.values():  # warm: templates compiled, catalogs loaded
                    for _ in range(5):
                        _get(sessions[page], url + page, header)
            for _ in range(rounds):
                for page in PAGES:
                    order = list(LANGUAGES.items())
                    random.shuffle(order)
                    for language, header in order:
                        began = time.perf_counter()
                        _get(sessions[page], url + page, header)
                        times.setdefault((page, language), []).append(time.perf_counter() - began)
    return _report(times, rounds)


def _get(session: requests.Session, url: str, accept_language: str) -> None:
    answer = session.get(url, headers={"Accept-Language": accept_language}, timeout=30, allow_redirects=False)
    if answer.status_code != 200:
        raise RuntimeError(f"{url} answered {answer.status_code}")


def _report(times: dict[tuple[str, str], list[float]], rounds: int) -> int:
    print(f"Pages by language: {rounds} rounds, each page once per language per round, medians")
    missed = False
    for page in PAGES:
        english = median(times[(page, "en")])
        print(Figure(f"{page} en", ms(english)).line())
        for language in LANGUAGES:
            if language == "en":
                continue
            own = median(times[(page, language)])
            ratio = own / english
            paired = statistics.median(a / b for a, b in zip(times[(page, language)], times[(page, "en")],
                                                                strict=True))
            missed |= ratio > TARGET
            print(Figure(f"{page} {language}", ms(own)).line())
            print(Figure(f"{page} {language} / en (paired {paired:.2f}x)", f"{ratio:.3f}x",
                         f"<= {TARGET}x", ratio <= TARGET).line())
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
