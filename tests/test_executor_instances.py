"""The executor with several Home Assistants (issue 29): a card allowed after its Home Assistant was removed reads
nothing and says why, as any card whose settings changed while it was open."""

from __future__ import annotations

import json

from console_ha.capabilities.get_state import NAME as GET_STATE
from console_ha.capabilities.stages import Turn
from console_ha.store.datadir import DataDir
from console_ha.store.instances import Instances
from tests.executors import configured, refusal
from tests.stub_ha import StubHomeAssistant
from tests.two_instances import CABIN, seed_instance

ENTITY = "sensor.living_room_temperature"


def test_a_card_allowed_after_its_home_assistant_was_removed_is_refused_as_changed_and_reads_nothing(
        data_dir: DataDir, two_homes: tuple[StubHomeAssistant, StubHomeAssistant]) -> None:
    """Not "reading is switched off in Settings" (the house's still is): the card's Home Assistant is gone."""
    house, cabin = two_homes
    executor = configured(data_dir, house, [ENTITY])
    seed_instance(data_dir, cabin, [ENTITY])
    card = executor.propose(GET_STATE, {"entity_id": ENTITY, "instance": CABIN}, conversation_id="c")
    Instances(data_dir).remove(CABIN)
    sent = len(house.requests), len(cabin.requests)

    error = refusal(lambda: executor.answer(card.token, approve=True, conversation_id="c"))

    assert (error.code, error.stage, error.detail.get("reason")) == ("CONFIRMATION_INVALID", 4, "settings_changed")
    assert (len(house.requests), len(cabin.requests)) == sent
    last = json.loads(data_dir.audit_log.read_text().splitlines()[-1])
    assert (last["event"], last["stage"], last["code"], last["instance"]) == (
        "rejected", 4, "CONFIRMATION_INVALID", CABIN)



def test_one_turn_may_read_each_home_assistant_once_so_the_house_and_the_cabin_compare(
        data_dir: DataDir, two_homes: tuple[StubHomeAssistant, StubHomeAssistant]) -> None:
    """The bound of one read of a kind per turn holds for each Home Assistant: a second of the same is refused."""
    house, cabin = two_homes
    executor = configured(data_dir, house, [ENTITY])
    seed_instance(data_dir, cabin, [ENTITY])
    turn = Turn()
    for instance in ("home", CABIN):
        executor.propose(GET_STATE, {"entity_id": ENTITY, "instance": instance}, conversation_id="c", turn=turn)

    error = refusal(lambda: executor.propose(GET_STATE, {"entity_id": ENTITY, "instance": CABIN},
                                             conversation_id="c", turn=turn))

    assert (error.code, error.stage) == ("INVOCATION_LIMIT_EXCEEDED", 3)
