/**
 * The official MCP SDK's client against a daemon, and the shape of a tool's
 * answer as a test reads it.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { expect } from 'vitest';

/** A tool's answer: its structured content, text, and the catalog code of a tool error. */
export interface Answer {
  readonly isError: boolean;
  readonly structured: any;
  readonly text: string;
  /** The catalog code of a tool error, from its text (CODE: message) and its metadata, which must agree. */
  readonly code: string | undefined;
}

export class McpTestClient {
  readonly client: Client;

  private constructor(client: Client) {
    this.client = client;
  }

  static async connect(transport: Transport): Promise<McpTestClient> {
    const client = new Client({ name: 'execworld-test', version: '0.0.0' });
    await client.connect(transport);
    return new McpTestClient(client);
  }

  /** Over Streamable HTTP to the daemon at `url`, with `token` as a bearer token or in `header`. */
  static http(url: string, token: string, header: 'authorization' | 'x-execworld-token' = 'authorization'): Promise<McpTestClient> {
    const headers = header === 'authorization' ? { authorization: `Bearer ${token}` } : { 'x-execworld-token': token };
    return McpTestClient.connect(new StreamableHTTPClientTransport(new URL('/mcp', url), { requestInit: { headers } }));
  }

  async tools(): Promise<string[]> {
    const { tools } = await this.client.listTools();
    return tools.map((tool) => tool.name);
  }

  /** Calls `name`; the client validates structured content against the tool's output schema. */
  async call(name: string, args: Record<string, unknown> = {}): Promise<Answer> {
    const result = (await this.client.callTool({ name, arguments: args })) as {
      isError?: boolean;
      structuredContent?: unknown;
      content: { type: string; text?: string }[];
      _meta?: Record<string, any>;
    };
    const text = result.content.map((part) => part.text ?? '').join('');
    const isError = result.isError === true;
    let code: string | undefined;
    if (isError) {
      code = /^([A-Z_]+): /.exec(text)?.[1];
      expect(result._meta?.['execworld/error']?.code, text).toBe(code);
    }
    return { isError, structured: result.structuredContent, text, code };
  }

  /** Calls `name` and expects success. */
  async ok(name: string, args: Record<string, unknown> = {}): Promise<any> {
    const answer = await this.call(name, args);
    expect(answer.isError, answer.text).toBe(false);
    return answer.structured;
  }

  close(): Promise<void> {
    return this.client.close();
  }
}
