"""What tests do to the household queue's cards that the package does only through a front end."""

from __future__ import annotations

from console_ha.answers.household_queue import HouseholdQueue, WaitingRead


def withdraw(queue: HouseholdQueue, card: WaitingRead) -> None:
    """The program takes its request back, as an MCP client's cancel does: the card goes, a late answer is refused.

    Through `HouseholdQueue.cancel`, the package's one way to it, for each call still attached to the card.
    """
    for call in list(card.calls):
        queue.cancel(card, call)
