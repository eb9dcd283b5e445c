"""An executor over a data dir's own stores, for tests that drive the executor without a whole Console."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from console_ha.capabilities.confirmations import ConfirmationStore
from console_ha.capabilities.executor import Executor
from console_ha.console import CONSOLE_READS
from console_ha.errors import CapabilityError
from console_ha.ha.kept_clients import LendClient, one_client
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret
from console_ha.store.audit import AuditLog
from console_ha.store.datadir import DataDir
from console_ha.store.instances import Instances
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant


@contextmanager
def console_client(base_url: str, token: Secret, ca_bundle: str | None) -> Iterator[HomeAssistantClient]:
    """A client for one use reading what the Console declares (as `Console.open` makes them), closed after it."""
    with HomeAssistantClient(base_url, token, ca_bundle=ca_bundle, reads=CONSOLE_READS) as client:
        yield client


def executor_over(data_dir: DataDir, *, confirmations: ConfirmationStore | None = None,
                  clients: LendClient = one_client, clock: Callable[[], float] = time.time) -> Executor:
    """An `Executor` with the stores `Console.open` would hand it, each fresh over `data_dir`."""
    return Executor(Instances(data_dir), audit=AuditLog(data_dir),
                    confirmations=confirmations or ConfirmationStore(clock=clock), clients=clients, clock=clock)


def configured(data_dir: DataDir, stub: StubHomeAssistant, allowlist: list[str]) -> Executor:
    """An executor over `data_dir`, its settings saved for `stub` with `allowlist` (and the stub's token)."""
    seed_settings(data_dir, {"enabled": True, "base_url": stub.base_url, "allowlisted_entities": allowlist},
                  token=stub.token)
    return executor_over(data_dir)


def refusal(call: Callable[[], object]) -> CapabilityError:
    """The CapabilityError `call` raises (the test fails if it raises none)."""
    with pytest.raises(CapabilityError) as caught:
        call()
    return caught.value
