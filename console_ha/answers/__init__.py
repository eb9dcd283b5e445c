"""The household's answers: each card's life (asked, allowed, refused, expired), the queue of cards that MCP
programs wait on, the confirmation tokens of the Console's own conversations, and the pages' long poll."""
