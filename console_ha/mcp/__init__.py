"""The capabilities as MCP tools: the server behind `/mcp`, and the stdio forwarder `console-ha mcp`."""
