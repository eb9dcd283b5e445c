"""Conversation turns with the household's model: the turn loop and the OpenAI-compatible adapter."""

from __future__ import annotations

from console_ha.conversation.conversations import ConversationStore
from console_ha.conversation.model import (
    ChatModel,
    ModelNotConfigured,
    ModelReply,
    ModelSettings,
    ModelUnavailable,
    OpenAICompatibleModel,
    ToolCall,
    capability_name,
    function_name,
    tool_definitions,
)
from console_ha.conversation.turn_loop import (
    SYSTEM_PROMPT,
    ConversationService,
    InvalidMessage,
    TurnResult,
)

__all__ = [
    "SYSTEM_PROMPT",
    "ChatModel",
    "ConversationService",
    "ConversationStore",
    "InvalidMessage",
    "ModelNotConfigured",
    "ModelReply",
    "ModelSettings",
    "ModelUnavailable",
    "OpenAICompatibleModel",
    "ToolCall",
    "TurnResult",
    "capability_name",
    "function_name",
    "tool_definitions",
]
