"""The long poll behind every page's waiting count: answered on a change at once, else at its timeout; bounded."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from console_ha.answers.page_watch import BUSY_RETRY_SECONDS, HouseholdWatch, card_id


def _card(token: str, client: str = "desk assistant", title: str = "Read the history of Kitchen?") -> Any:
    return SimpleNamespace(token=token, client=client, proposal=SimpleNamespace(card=SimpleNamespace(title=title)))


class Cards:
    """The queue's waiting reads, changed by the test."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def __call__(self) -> list[Any]:
        return list(self.items)


class Looks:
    """The watch's clock: it moves `step` seconds at each reading and counts them (one a look at the queue)."""

    def __init__(self, step: float = 0.0) -> None:
        self.now = 0.0
        self.step = step
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        self.now += self.step
        return self.now


def test_an_answer_comes_at_once_when_the_page_has_seen_another_version() -> None:
    """A page that rendered before a card arrived learns of it without waiting: at its first look."""
    cards = Cards()
    looks = Looks()
    watch = HouseholdWatch(cards, tick=0.01, timer=looks)
    empty = watch.now().version
    cards.items.append(_card("t1"))
    answer = watch.wait(empty, "s", timeout=5)
    assert looks.reads == 2  # when it ends (timeout from now), and its first look
    assert answer.version != empty and answer.to_dict()["count"] == 1
    card = answer.to_dict()["cards"][0]
    assert card["id"] == card_id(cards.items[0]) and "t1" not in str(answer.to_dict())
    assert card["notification_title"] == "“desk assistant” asks to read Home Assistant"
    assert card["notification_body"].startswith("Read the history of Kitchen?")


def test_a_new_card_ends_an_open_wait_within_a_tick() -> None:
    """The wait holds while nothing changes and ends within a tick of a new card (the target is 2 s)."""
    cards = Cards()
    looks = Looks()  # a clock that stands still: the wait never times out by itself
    watch = HouseholdWatch(cards, tick=0.05, timer=looks)
    seen = watch.now().version
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(watch.wait(seen, "s", timeout=10)))
    thread.start()
    _until(lambda: looks.reads >= 4)
    assert not result and watch.watching() == 1
    added = looks.reads
    cards.items.append(_card("t1"))
    thread.join(5)
    # The look under way when the card came, or the next: never a later one.
    assert result[0].to_dict()["count"] == 1 and looks.reads - added <= 2
    assert watch.watching() == 0


def test_with_nothing_new_the_answer_comes_at_the_timeout() -> None:
    """The same version again, after the timeout: the page simply asks again."""
    cards = Cards()
    looks = Looks(step=0.1)
    watch = HouseholdWatch(cards, tick=0.02, timer=looks)
    seen = watch.now().version
    answer = watch.wait(seen, "s", timeout=0.3)
    # Its end read at 0.1 is 0.4; the looks at 0.2 and 0.3 wait on, the one at 0.4 answers: not before, not after.
    assert looks.reads == 4 and looks.now == pytest.approx(0.4)
    assert answer.version == seen and not answer.busy


def test_a_card_that_goes_away_by_itself_is_a_change_too() -> None:
    """Expiry is not announced by any call; the watch sees the list change."""
    cards = Cards()
    cards.items.append(_card("t1"))
    watch = HouseholdWatch(cards, tick=0.01)
    seen = watch.now().version
    cards.items.clear()
    assert watch.wait(seen, "s", timeout=5).to_dict()["count"] == 0


def test_open_waits_are_bounded_per_session_and_overall() -> None:
    """Past either bound the answer is at once and busy, with when to ask again; a finished wait frees its place."""
    cards = Cards()
    watch = HouseholdWatch(cards, max_watchers=3, per_session=2, tick=0.02)
    seen = watch.now().version
    threads = [threading.Thread(target=watch.wait, args=(seen, session, 1.0)) for session in ("a", "a", "b")]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 2
    while watch.watching() < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert watch.watching() == 3
    third_of_a = watch.wait(seen, "a", timeout=5)
    assert third_of_a.busy and third_of_a.to_dict()["retry_after"] == BUSY_RETRY_SECONDS
    assert watch.wait(seen, "c", timeout=5).busy  # overall bound
    for thread in threads:
        thread.join(5)
    assert watch.watching() == 0
    assert not watch.wait(seen, "a", timeout=0.05).busy


# -- issue 25: a page's place is freed as soon as the page goes ---------------------------------------------

TAB = "tab-0123456789"


def _open(watch: HouseholdWatch, seen: str, session: str, timeout: float, **ids: str) -> tuple[threading.Thread,
                                                                                                 list[Any]]:
    """A question asked in a thread; its answer and how long it took land in the list."""
    out: list[Any] = []

    def ask() -> None:
        started = time.monotonic()
        out.append((watch.wait(seen, session, timeout, **ids), time.monotonic() - started))

    thread = threading.Thread(target=ask)
    thread.start()
    return thread, out


def _until(condition: Any, seconds: float = 2.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert condition()


def test_a_newer_question_of_the_same_tab_ends_the_older_and_takes_its_place() -> None:
    """Moving through pages in one tab: each new page's question replaces the last, never turned away as busy."""
    watch = HouseholdWatch(Cards(), max_watchers=6, per_session=2, tick=0.02)
    seen = watch.now().version
    other, _ = _open(watch, seen, "s", 5.0, page="another-tab-01", load="load-0000001")
    _until(lambda: watch.watching() == 1)
    asked: list[tuple[threading.Thread, list[Any]]] = []
    for n in range(5):
        # A tab's pages come one after another: each asks once the one before holds the tab's place.
        asked.append(_open(watch, seen, "s", 5.0, page=TAB, load=f"load-{n:07d}"))
        _until(lambda: watch.watching() == 2 and all(out for _, out in asked[:-1]))
    for thread, out in asked[:-1]:  # each ended when the next page of the tab asked, not at its timeout
        thread.join(5)
        assert not thread.is_alive() and not out[0][0].busy
        assert out[0][0].to_dict()["replaced"] is True
    assert watch.watching() == 2  # the other tab's question and this tab's latest
    last, out = asked[-1]
    assert last.is_alive() and not out
    assert watch.leave("s", TAB, "load-0000004") and watch.leave("s", "another-tab-01", "load-0000001")
    last.join(2)
    other.join(2)
    assert watch.watching() == 0


def test_leaving_ends_the_question_at_once_and_frees_its_place() -> None:
    """A page that goes (its beacon): its question answers now, and another tab is no longer turned away."""
    watch = HouseholdWatch(Cards(), max_watchers=6, per_session=1, tick=0.02)
    seen = watch.now().version
    thread, out = _open(watch, seen, "s", 10.0, page=TAB, load="load-first01")
    _until(lambda: watch.watching() == 1)
    assert watch.wait(seen, "s", 5.0, page="second-tab-01", load="load-first02").busy
    assert watch.leave("s", TAB, "load-first01")
    assert watch.watching() == 0  # freed by the leave itself, whenever the thread gets to answer
    thread.join(5)  # half its 10 s timeout: a loaded machine is slow, not 5 s slow
    assert not thread.is_alive() and out[0][0].version == seen
    assert "replaced" not in out[0][0].to_dict()
    assert not watch.wait(seen, "s", 0.05, page="second-tab-01", load="load-first02").busy


def test_a_leave_ends_only_the_load_it_names_and_only_in_its_own_session() -> None:
    """A reload's new question stays when the old page's beacon comes late; another session's leave does nothing."""
    watch = HouseholdWatch(Cards(), tick=0.02)
    seen = watch.now().version
    thread, out = _open(watch, seen, "s", 0.6, page=TAB, load="load-newer01")
    _until(lambda: watch.watching() == 1)
    assert not watch.leave("s", TAB, "load-older01")  # the page the tab left, its beacon arriving late
    assert not watch.leave("other session", TAB, "load-newer01")
    assert not watch.leave("s", TAB, "")
    assert watch.watching() == 1
    thread.join(3)
    assert out[0][1] >= 0.5  # held to its timeout: nothing ended it


def test_a_question_without_a_tab_id_is_counted_alone() -> None:
    """Ids that are not a page's own random ones are not trusted to replace anything."""
    watch = HouseholdWatch(Cards(), max_watchers=6, per_session=2, tick=0.02)
    seen = watch.now().version
    held = [_open(watch, seen, "s", 0.5, page="x", load="y") for _ in range(2)]
    _until(lambda: watch.watching() == 2)
    assert watch.wait(seen, "s", 5.0, page="x", load="y").busy
    for thread, _ in held:
        thread.join(2)


def test_a_logout_ends_every_question_of_its_session_and_no_other() -> None:
    """The session's pages learn at once that it ended (their next question is refused); others keep theirs."""
    watch = HouseholdWatch(Cards(), max_watchers=6, per_session=2, tick=0.02)
    seen = watch.now().version
    mine = [_open(watch, seen, "s", 10.0, page=f"tab-{n}-0123456", load="load-first01") for n in range(2)]
    theirs, theirs_out = _open(watch, seen, "other", 0.6, page=TAB, load="load-first01")
    _until(lambda: watch.watching() == 3)
    assert watch.end_session("s") == 2
    assert watch.watching() == 1  # freed by the logout itself
    for thread, out in mine:
        thread.join(5)  # half their 10 s timeout
        assert not thread.is_alive() and out[0][0].version == seen
    theirs.join(3)
    assert theirs_out[0][1] >= 0.5  # held to its timeout: the other session's logout ended nothing of it
