"""The past hour, day or week: the periods a read of one entity's recent changes covers (get_history, get_logbook).

Each period's length and the words its card says it in are kept here once; the argument's choices, the model's
description and the refusal's words are made from the same table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from console_ha.capabilities.read_arguments import one_of
from console_ha.language import N_


@dataclass(frozen=True)
class RecentPeriod:
    """One period the model may ask for: how far back it reaches, and how a card says it."""

    length: timedelta
    words: str  # "the past hour", as the card's body reads "over {period}" (a Words there)


RECENT_PERIODS: dict[str, RecentPeriod] = {
    # Translators: the period a card's history or logbook read covers, as it reads after "over" in that card.
    "hour": RecentPeriod(timedelta(hours=1), N_("the past hour")),
    # Translators: the period a card's history or logbook read covers, as it reads after "over" in that card.
    "day": RecentPeriod(timedelta(days=1), N_("the past day")),
    # Translators: the period a card's history or logbook read covers, as it reads after "over" in that card.
    "week": RecentPeriod(timedelta(weeks=1), N_("the past week")),
}
ONE_OF_THE_RECENT_PERIODS = one_of(RECENT_PERIODS)  # "hour, day or week"
