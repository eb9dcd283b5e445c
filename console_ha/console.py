"""The composition root: one Console's services, each built once from its data dir.

`create_app` (web), the `console-ha` command and `wsgi.py` open a Console here and hand its services to
whatever serves them; the next front end does the same. Nothing here knows of HTTP or Flask.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from console_ha.answers.card_events import StageHookRunner
from console_ha.answers.household_queue import MAX_WAITING, HouseholdQueue
from console_ha.answers.page_watch import HouseholdWatch
from console_ha.capabilities.card_facts import CardMemory
from console_ha.capabilities.confirmations import CONFIRMATION_TTL_SECONDS, ConfirmationStore
from console_ha.capabilities.executor import Executor
from console_ha.capabilities.registry import HOME_ASSISTANT_READS
from console_ha.conversation.conversations import ConversationStore
from console_ha.conversation.model import OpenAICompatibleModel
from console_ha.conversation.model_service import ModelEnvironment, ModelSettingsService
from console_ha.conversation.model_setup import environment_values
from console_ha.conversation.turn_loop import ConversationService
from console_ha.ha.call_limits import CallCaps
from console_ha.ha.discovery import discover
from console_ha.ha.home_assistants import ClientMaker, HomeAssistants
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.plugins.plugin_registry import Plugins
from console_ha.plugins.plugin_settings import PluginSettings
from console_ha.settings.catalogue import PICKER_READS
from console_ha.settings.connection import CONNECTION_TEST_READS
from console_ha.settings.saving import recover, recover_leftovers
from console_ha.settings.settings_service import SettingsService, Timeouts
from console_ha.store.audit import AuditLog
from console_ha.store.config import ConfigStore
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.console_settings import ConsoleSettingsStore
from console_ha.store.conversation_files import ConversationFiles
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import TokenStore
from console_ha.store.instances import Instances
from console_ha.store.model_config import ModelStore
from console_ha.store.plugin_switches import PluginSwitches
from console_ha.store.plugin_values import PluginValuesFile
from console_ha.store.review import ReviewStore

# Everything the Console reads from Home Assistant, as its parts declare it: the capabilities (the registry),
# the picker and the connection test. The Console's client reads these and nothing else.
CONSOLE_READS: Reads = HOME_ASSISTANT_READS | PICKER_READS | CONNECTION_TEST_READS


def open_credentials(data_dir: DataDir) -> ConsoleSecrets:
    """The Console's password and API tokens alone (`console-ha set-password`, `api-token`), after the sweep."""
    # Unlike Console.open, this neither makes nor narrows the data dir: only a write of a password or a token
    # makes it, so listing the tokens or a refused password on a mistyped --data-dir leaves nothing behind.
    # As Console.open: temp files a killed write left behind; a legacy token bound to its origin.
    recover_instances(Instances(data_dir))
    return ConsoleSecrets(data_dir)


def recover_instances(instances: Instances) -> None:
    """`settings.saving.recover` for every instance: temp files a killed write left, a legacy token's origin; and
    the secrets an unfinished create or remove of an instance left (`recover_leftovers`)."""
    for instance in instances.ids():
        stores = instances.get(instance)
        recover(instances.data_dir, stores.config, stores.token)
    recover_leftovers(instances)


@dataclass(frozen=True)
class ConsoleOptions:
    """What a front end may tune when it opens a Console; the defaults are those of `console-ha serve`."""

    # How long a read asked for by another program (MCP) waits for the household, and how many may wait.
    household_confirmation_ttl: float = CONFIRMATION_TTL_SECONDS
    household_max_waiting: int = MAX_WAITING
    # The CONSOLE_HA_LLM_* values in force, asked for at every turn: a change applies from the next one.
    model_environment: ModelEnvironment = environment_values
    # Bounds on the settings page's calls to the outside (discovery, the picker, the connection test).
    settings_timeouts: Timeouts = field(default_factory=Timeouts)
    # How many calls to Home Assistant may be in flight, to one and to all (`console-ha serve` fits them to
    # its --threads: CallCaps.for_threads).
    call_caps: CallCaps = field(default_factory=CallCaps)
    # The household's plugins (issue 30): a test's own, registered in code; None: those installed under the
    # entry point group `console_ha`.
    plugins: Plugins | None = None


@dataclass
class Console:
    """Every service of one Console. Front ends receive these; none of them builds its own.

    Not frozen: a test may swap one service (a clocked conversation service, say) after opening.
    """

    data_dir: DataDir
    # The Home Assistants it reads, each with its own settings, token and CA certificate.
    instances: Instances
    # The `home` instance's settings file and token (`instances.home`'s), for what knows one Home Assistant.
    config_store: ConfigStore
    token_store: TokenStore
    secrets: ConsoleSecrets
    audit: AuditLog
    model_store: ModelStore
    # The model settings page's core: what is in force, save, reset, the one-at-a-time model test.
    model_settings: ModelSettingsService
    # What it keeps per Home Assistant: its clients, their call limits and the areas (`ha.home_assistants`).
    home_assistants: HomeAssistants
    # The household's own conversation page: its turns, and the executor whose cards it shows.
    executor: Executor
    conversation: ConversationService
    # Reads asked for by programs (MCP, a program's conversation message), waiting for the household on its
    # confirmations page; their own executor (below).
    household: HouseholdQueue
    model_environment: ModelEnvironment
    # The settings page's core: read, save, the token's rules, the picker's catalogue, test, discovery.
    settings: SettingsService
    # Every open page's long poll for a change in the household's waiting cards (its count and alert).
    household_watch: HouseholdWatch
    # The Console's own settings: the household's Language choice (issue 26).
    console_settings: ConsoleSettingsStore
    # What this Console's cards may say of the devices before a read (areas, kinds of reading), filled by its
    # reads and its picker; its own, so another Console in the process never sees it.
    card_memory: CardMemory
    # The household's plugins (issue 30), loaded once: both executors call their hooks; the plugins page and
    # `console-ha plugins` list them and turn them off.
    plugins: Plugins
    stage_hooks: StageHookRunner

    def close(self) -> None:
        """End what runs beside the front end: the plugins' worker (its waiting events dropped, the one being told
        given its deadline, the thread joined). The front end stops serving first; a closed Console tells no plugin."""
        self.stage_hooks.close()

    @classmethod
    def open(cls, data_dir: DataDir, options: ConsoleOptions | None = None, *,
             make_client: ClientMaker = HomeAssistantClient) -> Console:
        """Make the data dir, repair what a killed write left behind, and build every service once.

        `make_client` makes each kept client (a test or a benchmark wraps the real one to watch it).
        """
        options = options or ConsoleOptions()
        data_dir.ensure()
        instances = Instances(data_dir)
        config_store, token_store = instances.home.config, instances.home.token
        recover_instances(instances)  # leftover temp files; a legacy token bound to its origin
        # One audit log for every executor: it appends under its own lock, so lines never interleave.
        audit = AuditLog(data_dir)
        model_store = ModelStore(data_dir)
        model_environment = options.model_environment
        model_settings = ModelSettingsService(model_store, instances=instances, environment=model_environment)
        card_memory = CardMemory()
        # The household's plugins (issue 30), loaded once, before the executors that call their hooks.
        plugins = options.plugins if options.plugins is not None else Plugins.installed(
            PluginSwitches(data_dir), PluginSettings(PluginValuesFile(data_dir)))
        home_assistants = HomeAssistants(reads=CONSOLE_READS, caps=options.call_caps, keep=card_memory.keep_areas,
                                         make=make_client)
        clients = home_assistants.clients
        executor = Executor(instances, audit=audit, confirmations=ConfirmationStore(), clients=clients.lend,
                            memory=card_memory, plugins=plugins)
        # Read afresh for every request to the model: a save on the model settings applies from the next turn.
        model = OpenAICompatibleModel.from_source(model_settings.settings_in_force)
        # Other programs' reads have an executor of their own only for its confirmation store: their cards
        # expire on their own TTL and never count towards (or push out) the conversation page's.
        household_executor = Executor(
            instances, audit=audit, clients=clients.lend,
            confirmations=ConfirmationStore(ttl=options.household_confirmation_ttl), memory=card_memory,
            plugins=plugins,
        )
        console_settings = ConsoleSettingsStore(data_dir)
        hooks = StageHookRunner(plugins, audit, language=console_settings.language)
        household = HouseholdQueue(household_executor, max_waiting=options.household_max_waiting, hooks=hooks)
        # The household's conversations as the last run left them (a card that was open is closed, and said so).
        # Each card a restart or an eviction closed is told to the plugins (`StageHookRunner.closed`).
        conversations = ConversationStore(files=ConversationFiles(data_dir), closed=hooks.closed)
        conversations.load()
        return cls(
            data_dir=data_dir,
            instances=instances,
            config_store=config_store,
            token_store=token_store,
            secrets=ConsoleSecrets(data_dir),
            audit=audit,
            model_store=model_store,
            model_settings=model_settings,
            home_assistants=home_assistants,
            executor=executor,
            conversation=ConversationService(executor, model, household=household,
                                             store=conversations, hooks=hooks),
            household=household,
            model_environment=model_environment,
            settings=SettingsService(instances, review_store=ReviewStore(data_dir), clients=clients,
                                     discover=discover, timeouts=options.settings_timeouts,
                                     areas=home_assistants.entity_areas,
                                     card_memory=card_memory),
            household_watch=HouseholdWatch(household.pending),
            console_settings=console_settings,
            card_memory=card_memory,
            plugins=plugins,
            stage_hooks=hooks,
        )
