// One MCP program built on the official TypeScript SDK: it calls one tool over streamable HTTP with the
// SDK's default request timeout (60 s), and calls again while the Console answers `waiting_for_household`.
// Usage: node call_tool.mjs URL TOOL ARGUMENTS_JSON [MAX_CALLS]; the API token comes from
// CONSOLE_HA_API_TOKEN. Prints one JSON line per call result, then `{"done": true}`.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, tool, argumentsJson, maxCalls = "5"] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.CONSOLE_HA_API_TOKEN}` } },
});
const client = new Client({ name: "console-ha-tests", version: "1.0.0" });
await client.connect(transport);
await client.listTools(); // so the SDK checks each result against the tool's outputSchema, as hosts do
for (let call = 0; call < Number(maxCalls); call += 1) {
  const started = Date.now();
  const result = await client.callTool({ name: tool, arguments: JSON.parse(argumentsJson) });
  const waiting = result.structuredContent?.waiting_for_household !== undefined;
  console.log(JSON.stringify({ call, seconds: (Date.now() - started) / 1000, waiting, result }));
  if (!waiting) break;
}
console.log(JSON.stringify({ done: true }));
await client.close();
