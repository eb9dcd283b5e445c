// One MCP program built on the official TypeScript SDK: it lists the Console's tools over streamable HTTP.
// Usage: node list_tools.mjs URL; the API token comes from CONSOLE_HA_API_TOKEN. Prints the tools as one JSON line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.CONSOLE_HA_API_TOKEN}` } },
});
const client = new Client({ name: "console-ha-tests", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
console.log(JSON.stringify(tools));
await client.close();
