"""The MCP server: a read-only tool per registered capability, each call through the household queue and executor.

Built on the official SDK's low-level server, which takes the capability's own JSON schemas as the
tools' `inputSchema` and `outputSchema` unchanged. It knows nothing of HTTP: the web layer puts the
caller (the API token's name, and where the household answers) into the request's ASGI scope.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server

from console_ha import __version__
from console_ha.answers.card_state import hung_up
from console_ha.answers.household_queue import Asker, Call, HouseholdQueue, StillWaiting, WaitingRead
from console_ha.capabilities.confirmations import CONFIRMATION_TTL_SECONDS
from console_ha.capabilities.executor import Prepared
from console_ha.capabilities.registry import REGISTRY
from console_ha.capabilities.spec import Capability, arguments_schema_for
from console_ha.errors import CapabilityError, ConsoleHaError, Forbidden, InternalError, error_body
from console_ha.store.datadir import HOME_INSTANCE

log = logging.getLogger(__name__)

# The ASGI scope key under which the web layer hands over who is calling (an `Asker`).
CALLER_SCOPE_KEY = "console_ha.caller"
# While a call waits, a client that asked for progress hears where to answer this often, in seconds.
PROGRESS_INTERVAL_SECONDS = 15.0
INSTRUCTIONS = (
    "Reads a household's Home Assistant, read-only, within the entities the household allowed. "
    "Every call waits until the household approves or denies it on their Console (up to "
    f"{CONFIRMATION_TTL_SECONDS // 60} minutes); a program using these tools cannot approve its own reads. "
    "A call the household has not answered within this program's patience returns `waiting_for_household`: "
    "make the same call again, with the same arguments, to collect the answer."
)
# How often a waiting call looks whether its program is still connected, in seconds (issue 20: a call
# whose client hung up is detached from its card, so an approval then reads nothing).
PRESENCE_INTERVAL_SECONDS = 1.0
# A tool call's JSON-RPC message is a few hundred bytes; nothing larger is ever needed. The Console answers a
# larger body 413 (web/mcp_endpoint.py); the stdio command answers such a call itself (mcp/stdio.py).
MAX_REQUEST_BYTES = 64 * 1024


def come_back_words(answer_url: str, expires_at: str) -> str:
    """What a call still unanswered says, in words a model can pass on to the person it talks to."""
    return (f"The household has been asked on their Console ({answer_url}) to allow this read and has not "
            "answered yet. Nothing has been read. Make this same call again, with the same arguments, to "
            f"collect their answer; the request stays open until {expires_at}.")


def tool_name(capability: Capability) -> str:
    """MCP tool names allow no dots: `home_assistant.get_history` is `home_assistant_get_history`."""
    return capability.name.replace(".", "_")


CAPABILITY_FOR_TOOL = {tool_name(capability): capability.name for capability in REGISTRY.values()}


# Issue 20: what a call still unanswered when its patience ran out returns, beside the capability's result.
WAITING_FOR_HOUSEHOLD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["waiting_for_household"],
    "additionalProperties": False,
    "properties": {"waiting_for_household": {
        "type": "object",
        "required": ["message", "expires_at"],
        "additionalProperties": False,
        "properties": {"message": {"type": "string"}, "expires_at": {"type": "string", "format": "date-time"}},
    }},
}


# A refusal, denial, expiry or failure: `error_body`'s shape, which an error result carries as structuredContent.
ERROR_RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "additionalProperties": False,
    "properties": {"error": {
        "type": "object",
        "required": ["code", "message"],
        "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
    }},
}


def output_schema(capability: Capability) -> dict[str, Any]:
    """The tool's `outputSchema`: the capability's result, `waiting_for_household`, or an error result's body.

    Clients check structuredContent against it: the Python SDK when the result is not an error, the
    TypeScript SDK (1.32) even when it is (it rejected every refusal and denial before the error shape
    was listed here). Definitions the result schema refers to (`#/$defs/...`) stay at the root.
    """
    result = dict(capability.result_schema)
    definitions = result.pop("$defs", None)
    schema: dict[str, Any] = {"type": "object",
                              "anyOf": [result, WAITING_FOR_HOUSEHOLD_SCHEMA, ERROR_RESULT_SCHEMA]}
    if definitions is not None:
        schema["$defs"] = definitions
    return schema


def tools(capabilities: Iterable[Capability] | None = None,
          instances: Sequence[str] = (HOME_INSTANCE,)) -> list[types.Tool]:
    """One tool per capability (every registered one by default): its description and schemas, read-only; the
    input schema as a caller gets it while `instances` are the Home Assistants there are (`arguments_schema_for`)."""
    return [
        types.Tool(
            name=tool_name(capability),
            description=capability.description,
            inputSchema=arguments_schema_for(capability, instances),
            outputSchema=output_schema(capability),
            annotations=types.ToolAnnotations(readOnlyHint=True, openWorldHint=True, destructiveHint=False),
        )
        for capability in (REGISTRY.values() if capabilities is None else capabilities)
    ]


def result_of(value: dict[str, Any]) -> types.CallToolResult:
    """A shaped result as structured content plus the same JSON as text."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structuredContent=value)


def error_of(err: ConsoleHaError) -> types.CallToolResult:
    """A refusal, denial, expiry or failure: `isError` with the contract's error object (`error_body`)."""
    body = error_body(err)
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structuredContent=body,
                                isError=True)


def waiting_of(waiting: WaitingRead, answer_url: str) -> types.CallToolResult:
    """A call still unanswered when its patience ran out: not an error; the same call again collects the answer."""
    body = {"waiting_for_household": {"message": come_back_words(answer_url, waiting.proposal.expires_at),
                                      "expires_at": waiting.proposal.expires_at}}
    return result_of(body)


def build_server(queue: HouseholdQueue, instance_ids: Callable[[], Sequence[str]], *,
                 progress_interval: float = PROGRESS_INTERVAL_SECONDS) -> Server:
    """The MCP server for the Console's `/mcp`; every call goes through `queue` (and so the executor).

    `instance_ids` says which Home Assistants there are (`Instances.ids`): asked at every `tools/list`, so an
    instance added or removed shows in the next listing.
    """
    server: Server = Server("console-ha", version=__version__, instructions=INSTRUCTIONS)

    # The SDK's decorator factories carry no annotations; the handlers below are fully typed.
    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        # Only the reads an allowlisted entity can answer, as the model is offered (issue 28).
        return tools(queue.offered(), instance_ids())

    # The SDK's own input check is off: the executor's stage 2 validates, audits and answers with the
    # contract's INVALID_ARGUMENTS, as it does for the conversation page.
    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        context = server.request_context
        caller = context.request.scope.get(CALLER_SCOPE_KEY) if context.request is not None else None
        if not isinstance(caller, Asker):
            # Only the web layer's bridge calls this server, and it always says who is calling.
            return error_of(Forbidden("The caller is not known."))
        progress_token = context.meta.progressToken if context.meta is not None else None

        async def report(waited: float, total: float) -> None:
            if progress_token is None:
                return
            try:
                await context.session.send_progress_notification(
                    progress_token, waited, total,
                    f"Waiting for the household to approve or deny this read on the Console: {caller.answer_url}",
                    related_request_id=str(context.request_id),
                )
            except Exception:  # a client gone away must not end the wait early; its cancel does
                log.debug("could not send a progress notification", exc_info=True)

        try:
            with caller.running():
                return await _call(queue, caller, CAPABILITY_FOR_TOOL.get(name, name), arguments, report,
                                   progress_interval)
        except Exception:
            # Else the SDK would answer with the exception's own words (a file path, say) and not the
            # contract's shape. Cancellation is not an Exception and still ends the call as it should.
            log.exception("an MCP tool call failed unexpectedly")
            return error_of(InternalError("Something went wrong inside the Console."))

    return server


async def _call(queue: HouseholdQueue, caller: Asker, capability: str, arguments: dict[str, Any],
                report: Any, progress_interval: float) -> types.CallToolResult:
    try:
        call = queue.join(caller, capability, arguments) or await _asked_anew(queue, caller, capability, arguments)
    except CapabilityError as err:
        return error_of(err)
    waiting = call.waiting
    try:
        await _wait_for_household(queue, call, caller, report, progress_interval)
    except BaseException:
        # Cancelled by the client (notifications/cancelled, or its session ended): the card is withdrawn, at
        # once and without awaiting, since this task is being cancelled. Not so when its response closed because
        # the client hung up (McpEndpoint.end): that is no withdrawal (the specification says so), and the card
        # stays for the program's next call; nor for a call a newer call of its program took the card over from.
        queue.cancel(waiting, call.attachment)
        raise
    # The queue decides what this call gets, in one step under its lock: the read (the household allowed it
    # in time, even a moment ago as the patience ran out: the household was told the program gets it now), the
    # denial or expiry, or nothing yet (then it lets go of the card in that same step, so an Allow a moment
    # later is told the read waits for the program's next call). A call another took the card over from gets
    # nothing: the newer call collects.
    try:
        return result_of(await anyio.to_thread.run_sync(queue.collect, waiting, call.attachment))
    except StillWaiting:
        return waiting_of(waiting, caller.answer_url)  # unanswered yet; or sent to nobody: the program hung up
    except CapabilityError as err:
        return error_of(err)
    finally:
        queue.detach(waiting, call.attachment)


async def _asked_anew(queue: HouseholdQueue, caller: Asker, capability: str, arguments: dict[str, Any]) -> Call:
    """A call that joined no card: its read's first step (stages 1-2 and the plugins' `before_toolcall`, a second
    each) in a worker thread, so no plugin holds up the event loop and every other session on it; then its card,
    made on the loop itself (a settings read and an audit line, milliseconds): in a worker thread, a cancellation
    arriving meanwhile would lose the card it made, left open with nobody waiting.

    A cancellation (or a hang-up) during the first step ends the call before any card is made, so none is lost
    and the household is never asked: the read the step let through is audited `cancelled` (`_FirstStep.leave`);
    a hang-up's call answers what a hang-up's later would (`hung_up`), which nobody reads.
    """
    step = _FirstStep(queue, caller.client, capability, arguments)
    try:
        await anyio.to_thread.run_sync(step.run)
        # The thread's wait is shielded (a plugin's thread cannot be stopped): a cancellation that came meanwhile
        # is delivered here, before the card.
        await anyio.lowlevel.checkpoint()
        if not caller.present():
            # Hung up meanwhile (waitress saw it; its response is not closed yet, so nothing cancelled this task): a
            # card now would ask the household, until its expiry, for nobody.
            raise hung_up()
    except BaseException:
        step.leave()
        raise
    assert step.read is not None  # run() returned: it prepared one, or raised its refusal
    return queue.call(caller, capability, arguments, step.read)


class _FirstStep:
    """One call's `HouseholdQueue.prepare` on a worker thread, and its end when the call leaves before its card:
    the read it let through (now, or when the thread ends after a native cancellation stopped waiting for it) is
    dropped, once."""

    def __init__(self, queue: HouseholdQueue, client: str, capability: str, arguments: dict[str, Any]) -> None:
        self._queue, self._asked = queue, (client, capability, arguments)
        self._lock = threading.Lock()
        self._left = False
        self.read: Prepared | None = None

    def run(self) -> None:
        read = self._queue.prepare(*self._asked)
        with self._lock:
            left, self.read = self._left, read
        if left:
            self._queue.drop(read)

    def leave(self) -> None:
        with self._lock:
            self._left, read = True, self.read
        if read is not None:
            self._queue.drop(read)


async def _wait_for_household(queue: HouseholdQueue, call: Call, caller: Asker, report: Any,
                              progress_interval: float) -> None:
    """Wait until the card is settled (the household answered: it wakes this wait at once) or expired, the call's
    patience ran out, a newer call of its program took the card over, or the program hung up. `_call` then
    asks the queue what the call gets."""
    waiting = call.waiting
    # The call's own future, which the queue sets at the card's every move and at a takeover; not the card's
    # `settled`, which outlives this call (a wrapper of it would stay hooked on it until the card ends).
    wake = asyncio.wrap_future(call.attachment.wake)
    total = max(queue.remaining(waiting), 0.0)
    started = time.monotonic()
    patience_ends = started + max(caller.patience, 0.0)
    next_report = started
    try:
        while True:
            now = time.monotonic()
            if now >= next_report:
                await report(min(now - started, total), total)
                next_report = now + progress_interval
            remaining = queue.remaining(waiting)
            if (waiting.settled.done() or wake.done() or remaining <= 0 or not caller.present()
                    or now >= patience_ends):
                return
            # The presence of the program is looked at every PRESENCE_INTERVAL_SECONDS (waitress tells no one of
            # a closed connection); the household's answer and a newer call end the wait at once, through `wake`
            # (issue 25: the answer was noticed only at the next look).
            timeout = min(remaining, next_report - now, patience_ends - now, PRESENCE_INTERVAL_SECONDS)
            await asyncio.wait((wake,), timeout=max(timeout, 0.0))
    finally:
        wake.cancel()  # the call's own: nothing else waits on it
