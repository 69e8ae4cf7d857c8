/**
 * `execworld mcp`: the daemon's MCP server (`/mcp`) for a client that
 * launches a command and speaks MCP on its stdin and stdout (Claude Desktop,
 * an IDE). Each message read from stdin is posted to the daemon over
 * Streamable HTTP with the token the other commands use, and each answer is
 * written to stdout; the tools run in the daemon, this process only carries
 * messages.
 * @module
 */
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { isJSONRPCRequest, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { sandboxRouter } from '@execworld/sdk';
import { TOKEN_HEADER } from '@execworld/sdk/protocol';
import { CLIENT_OPTIONS, daemonTarget } from './client.ts';
import { CliError, expectPositionals, type Command, defineCommand, optionHelp, type OptionTable } from './command.ts';

const OPTIONS = { ...CLIENT_OPTIONS } as const satisfies OptionTable;

const HELP = `Usage: execworld mcp [options]

Serves the daemon's MCP tools on stdin and stdout, for an MCP client that
launches a command (Claude Desktop, an IDE): every message is carried to the
daemon's /mcp endpoint and its answer back. The tools and their results are
described in docs/mcp.md. Nothing is written to stdout but MCP messages;
failures to reach the daemon are answered as errors of the calls they broke
and said on stderr.

Options:
${optionHelp(OPTIONS)}

Exit status: 0 once stdin ends; 1 when execworld failed; 2 for a usage error.
`;

/** JSON-RPC's error code for a failure of the server (the daemon could not be reached, or refused the request). */
const SERVER_ERROR = -32000;

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  expectPositionals(positionals, []);
  const target = daemonTarget(values);
  if (target.ca !== undefined)
    throw new CliError('mcp takes no --ca: pass the certificates as NODE_EXTRA_CA_CERTS=<file>, which Node adds to the ones it trusts');
  const headers: Record<string, string> =
    target.sandbox === undefined ? { authorization: `Bearer ${target.token}` } : { ...sandboxRouter(target.sandbox).headers, [TOKEN_HEADER]: target.token };
  const daemon = new StreamableHTTPClientTransport(new URL('/mcp', target.url), { requestInit: { headers } });
  const local = new StdioServerTransport();
  const ended = new Promise<void>((resolve) => {
    local.onclose = resolve;
    process.stdin.once('end', resolve);
  });

  daemon.onmessage = (message) => void local.send(message);
  daemon.onerror = (error) => process.stderr.write(`execworld: mcp: ${error.message}\n`);
  local.onmessage = (message: JSONRPCMessage) => {
    daemon.send(message).catch((error: unknown) => {
      const text = error instanceof Error ? error.message : String(error);
      process.stderr.write(`execworld: mcp: ${text}\n`);
      // A request the daemon never answered is answered here, so that the client does not wait for it forever.
      if (isJSONRPCRequest(message)) void local.send({ jsonrpc: '2.0', id: message.id, error: { code: SERVER_ERROR, message: `execworld: ${text}` } });
    });
  };
  await daemon.start();
  await local.start();
  await ended;
  await daemon.close();
  return 0;
});
