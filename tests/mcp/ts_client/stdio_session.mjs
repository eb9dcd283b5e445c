// The official TypeScript SDK's stdio client, as a host that starts `console-ha mcp --url URL` uses it: list
// the tools, send one large message, then start a call and cancel it when told (a line "cancel" on stdin).
// Usage: node stdio_session.mjs PYTHON CONSOLE_URL TOOL; the API token comes from CONSOLE_HA_API_TOKEN.
// Prints one JSON line per step: {"tools": [...]}, {"large": ...} twice, {"waiting": true}, {"cancelled": ...},
// then {"done": true}.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [python, url, tool] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: python, args: ["-m", "console_ha", "mcp", "--url", url], env: { ...process.env }, stderr: "inherit",
});
const client = new Client({ name: "console-ha-stdio-tests", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
console.log(JSON.stringify({ tools: tools.map((t) => t.name) }));

// Far more than one read of stdin (64 KiB), with characters of two and three bytes across every boundary,
// and over what the Console takes; then one of 25 KB, which the Console answers itself.
for (const pairs of [100_000, 5_000]) {
  const answer = await client.callTool({ name: tool, arguments: { padding: "é€".repeat(pairs) } });
  console.log(JSON.stringify({ large: answer.isError === true, code: answer.structuredContent?.error?.code }));
}

const lines = createInterface({ input: process.stdin });
const told = new Promise((resolve) => lines.once("line", resolve));
const abort = new AbortController();
const call = client.callTool({ name: tool, arguments: {} }, undefined, { signal: abort.signal, timeout: 600_000 });
console.log(JSON.stringify({ waiting: true }));
await told;
abort.abort("cancelled by the test");
const outcome = await call.then(() => "answered", (error) => String(error?.name ?? error));
console.log(JSON.stringify({ cancelled: outcome }));
await client.close();
lines.close();
console.log(JSON.stringify({ done: true }));
