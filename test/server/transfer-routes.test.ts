/**
 * The byte routes of uploads and archives over REST, and the transfer calls
 * of an owner confined to a root: every code the routes document, an archive
 * that tries to leave its directory (`..`, a link then a file through it, a
 * hard link to a file outside), and mkdir, remove, rename and uploads that
 * try to leave the root.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { OPERATIONS, type ErrorCode } from '@execworld/sdk/protocol';
import { expectDocumentedCodes } from '../helpers/codes.ts';
import { ALICE, ALICE_READER, BOB, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';

const CAROL = 'carol-token-0123456789abcdefg';
const scratch = mkdtempSync(join(tmpdir(), 'transfer-routes-'));
/** carol's root, and a directory beside it she must never reach. */
const root = join(scratch, 'root');
const outside = join(scratch, 'outside');
mkdirSync(root);
mkdirSync(outside);
writeFileSync(join(outside, 'secret.txt'), 'secret\n');
symlinkSync(outside, join(root, 'door'));

let daemon: TestDaemon;
const test = daemonTest(() => [
  {},
  {
    owners: [{ owner: 'carol', token: CAROL, root }],
  },
]);

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});
test.afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** A byte request: the answer's status, its bytes, and its error when it failed. */
/** A write token alice mints for one port, which makes no call. */
async function portToken(): Promise<string> {
  return (await daemon.request('POST', '/v1/tokens', { body: { access: 'write', ttlMs: 3_600_000, port: 8080 } })).body.token;
}

async function bytes(
  method: 'GET' | 'PUT',
  path: string,
  options: { body?: Buffer | string; token?: string | null; contentType?: string; headers?: Record<string, string> } = {},
) {
  const token = options.token === undefined ? ALICE : options.token;
  const response = await fetch(`${daemon.url}${path}`, {
    method,
    headers: {
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      ...(options.body === undefined ? {} : { 'content-type': options.contentType ?? 'application/octet-stream' }),
      ...options.headers,
    },
    ...(options.body === undefined ? {} : { body: options.body }),
  });
  const answer = Buffer.from(await response.arrayBuffer());
  let error: { code: ErrorCode; message: string } | undefined;
  if (response.status >= 400) error = (JSON.parse(answer.toString('utf8')) as { error: { code: ErrorCode; message: string } }).error;
  return { status: response.status, bytes: answer, error, json: () => JSON.parse(answer.toString('utf8')) };
}

const begin = async (path: string, token = ALICE): Promise<string> => {
  const created = await daemon.request('POST', '/v1/files/uploads', { body: { path }, token });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.id as string;
};

/** A tar archive made by the system's tar from `directory` with `args`. */
function tarOf(directory: string, args: string[]): Buffer {
  // One 512-byte block per record: the archive ends in exactly its two zero blocks, so two can be joined.
  return execFileSync('tar', ['-c', '--blocking-factor=1', '-C', directory, ...args], { maxBuffer: 64 * 1024 * 1024 });
}

describe('PUT /v1/files/uploads/{id}', () => {
  test('appends at the offset, refuses any other, and resumes from the offset it answers', async () => {
    const target = join(scratch, 'resumed.bin');
    const id = await begin(target);
    expect((await bytes('PUT', `/v1/files/uploads/${id}?offset=0`, { body: 'abc' })).json()).toEqual({ id, path: target, offset: 3 });
    const refused = await bytes('PUT', `/v1/files/uploads/${id}?offset=1`, { body: 'zzz' });
    expect(refused.error?.code).toBe('UPLOAD_OFFSET_MISMATCH');
    expect(refused.error?.message).toContain('has 3 bytes');
    expect((await daemon.request('GET', `/v1/files/uploads/${id}`)).body.offset).toBe(3);
    expect((await bytes('PUT', `/v1/files/uploads/${id}?offset=3`, { body: 'def' })).json().offset).toBe(6);
    const done = await daemon.request('POST', `/v1/files/uploads/${id}/complete`, { body: { size: 6 } });
    expect(done.status).toBe(200);
    expect(readFileSync(target, 'utf8')).toBe('abcdef');
  });

  test('answers each code it documents, with its status', async () => {
    const id = await begin(join(scratch, 'codes.bin'));
    const gone = await begin(join(scratch, 'gone.bin'));
    const scenarios: [ErrorCode, () => ReturnType<typeof bytes>][] = [
      ['INVALID_ARGUMENT', () => bytes('PUT', `/v1/files/uploads/${id}?offset=-1`, { body: 'x' })],
      ['UNAUTHORIZED', () => bytes('PUT', `/v1/files/uploads/${id}?offset=0`, { body: 'x', token: null })],
      ['TOKEN_SCOPE', async () => bytes('PUT', `/v1/files/uploads/${id}?offset=0`, { body: 'x', token: await portToken() })],
      ['READ_ONLY', () => bytes('PUT', `/v1/files/uploads/${id}?offset=0`, { body: 'x', token: ALICE_READER })],
      // Another owner's upload is not found: nothing is told about it.
      ['NOT_FOUND', () => bytes('PUT', `/v1/files/uploads/${id}?offset=0`, { body: 'x', token: BOB })],
      ['UPLOAD_OFFSET_MISMATCH', () => bytes('PUT', `/v1/files/uploads/${id}?offset=5`, { body: 'x' })],
      ['UNSUPPORTED_MEDIA_TYPE', () => bytes('PUT', `/v1/files/uploads/${id}?offset=0`, { body: '{}', contentType: 'application/json' })],
      [
        'FS_NOT_FOUND',
        async () => {
          // Its staged bytes removed behind the daemon's back.
          for (const name of readdirSync(scratch)) if (name.startsWith('.execworld-upload-')) rmSync(join(scratch, name), { recursive: true, force: true });
          return bytes('PUT', `/v1/files/uploads/${gone}?offset=0`, { body: 'x' });
        },
      ],
      ['HEADERS_TOO_LARGE', () => bytes('PUT', `/v1/files/uploads/${id}?offset=0`, { body: 'x', headers: { 'x-padding': 'p'.repeat(20_000) } })],
      ['URI_TOO_LONG', () => bytes('PUT', `/v1/files/uploads/u_${'x'.repeat(200)}?offset=0`, { body: 'x' })],
    ];
    // A disk that fails, a fault of the daemon, and Node's 60 s headers timeout cannot be brought about here.
    await expectDocumentedCodes(scenarios, OPERATIONS['upload.bytes'].errors, ['FS_IO_ERROR', 'CLIENT_TIMEOUT', 'INTERNAL']);
  });

  test('discards an upload that is deleted, and one of a daemon that shuts down', async ({ startDaemon }) => {
    const id = await begin(join(scratch, 'deleted.bin'));
    await bytes('PUT', `/v1/files/uploads/${id}?offset=0`, { body: 'abc' });
    expect((await daemon.request('DELETE', `/v1/files/uploads/${id}`)).status).toBe(200);
    expect((await daemon.request('GET', `/v1/files/uploads/${id}`)).status).toBe(404);
    const other = await startDaemon();
    const created = await other.request('POST', '/v1/files/uploads', { body: { path: join(scratch, 'shutdown.bin') } });
    expect(created.status).toBe(201);
    await other.close();
    expect(readdirSync(scratch).filter((name) => name.startsWith('.execworld-upload-'))).toEqual([]);
  });
});

describe('/v1/files/archive', () => {
  test('packs an empty directory as an empty archive, and answers each code it documents', async () => {
    const empty = join(scratch, 'empty-dir');
    mkdirSync(empty);
    const packed = await bytes('GET', `/v1/files/archive?path=${encodeURIComponent(empty)}`);
    expect(packed.status).toBe(200);
    expect(execFileSync('tar', ['-t'], { input: packed.bytes }).toString()).toBe('');
    const file = join(scratch, 'plain.txt');
    writeFileSync(file, 'x');
    const loop = join(scratch, 'loop');
    symlinkSync('loop', loop);
    const pack: [ErrorCode, () => ReturnType<typeof bytes>][] = [
      ['INVALID_ARGUMENT', () => bytes('GET', '/v1/files/archive')],
      ['UNAUTHORIZED', () => bytes('GET', `/v1/files/archive?path=${empty}`, { token: null })],
      ['TOKEN_SCOPE', async () => bytes('GET', `/v1/files/archive?path=${empty}`, { token: await portToken() })],
      ['FS_NOT_FOUND', () => bytes('GET', `/v1/files/archive?path=${join(scratch, 'missing')}`)],
      ['FS_NOT_DIRECTORY', () => bytes('GET', `/v1/files/archive?path=${file}`)],
      ['FS_PERMISSION_DENIED', () => bytes('GET', `/v1/files/archive?path=${join(root, 'door')}`, { token: CAROL })],
      ['FS_IO_ERROR', () => bytes('GET', `/v1/files/archive?path=${join(loop, 'x')}`)],
      ['HEADERS_TOO_LARGE', () => bytes('GET', `/v1/files/archive?path=${empty}`, { headers: { 'x-padding': 'p'.repeat(20_000) } })],
    ];
    await expectDocumentedCodes(pack, OPERATIONS['archive.pack'].errors, ['CLIENT_TIMEOUT', 'INTERNAL']);
    const tar = tarOf(empty, ['.']);
    const unpack = (path: string, options: Parameters<typeof bytes>[2] = {}) =>
      bytes('PUT', `/v1/files/archive?path=${encodeURIComponent(path)}`, { body: tar, contentType: 'application/x-tar', ...options });
    const unpackScenarios: [ErrorCode, () => ReturnType<typeof bytes>][] = [
      ['INVALID_ARGUMENT', () => bytes('PUT', '/v1/files/archive', { body: tar, contentType: 'application/x-tar' })],
      ['UNAUTHORIZED', () => unpack(empty, { token: null })],
      ['TOKEN_SCOPE', async () => unpack(empty, { token: await portToken() })],
      // A pack only reads; an unpack writes.
      ['READ_ONLY', () => unpack(empty, { token: ALICE_READER })],
      ['UNSUPPORTED_MEDIA_TYPE', () => unpack(empty, { body: '{}', contentType: 'application/json' })],
      ['FS_NOT_DIRECTORY', () => unpack(file)],
      ['FS_PERMISSION_DENIED', () => unpack(join(root, 'door'), { token: CAROL })],
      ['FS_IO_ERROR', () => unpack(join(loop, 'x'))],
      ['HEADERS_TOO_LARGE', () => unpack(empty, { headers: { 'x-padding': 'p'.repeat(20_000) } })],
    ];
    // An unpack makes its directory and the directories above it: FS_NOT_FOUND is only a directory removed while it is unpacked into.
    await expectDocumentedCodes(unpackScenarios, OPERATIONS['archive.unpack'].errors, ['FS_NOT_FOUND', 'CLIENT_TIMEOUT', 'INTERNAL']);
    expect((await bytes('GET', `/v1/files/archive?path=${empty}`, { token: ALICE_READER })).status).toBe(200);
  });

  test('refuses entries that would leave the directory, and lists them', async () => {
    const source = mkdtempSync(join(scratch, 'evil-'));
    // ../escape.txt
    mkdirSync(join(source, 'inner'));
    writeFileSync(join(source, 'escape.txt'), 'escaped\n');
    const dotdot = tarOf(join(source, 'inner'), ['-P', '../escape.txt']);
    // A link to the outside, then a file written through it.
    const linkSide = join(source, 'a');
    const fileSide = join(source, 'b');
    mkdirSync(linkSide);
    mkdirSync(join(fileSide, 'link'), { recursive: true });
    symlinkSync(outside, join(linkSide, 'link'));
    writeFileSync(join(fileSide, 'link', 'planted.txt'), 'planted\n');
    const throughLink = Buffer.concat([tarOf(linkSide, ['link']).subarray(0, -1024), tarOf(fileSide, ['link/planted.txt'])]);
    // A hard link to a file outside.
    const hardSide = join(source, 'c');
    mkdirSync(hardSide);
    writeFileSync(join(hardSide, 'x'), 'x\n');
    execFileSync('ln', [join(hardSide, 'x'), join(hardSide, 'y')]);
    const hardLink = tarOf(hardSide, ['-P', '--transform', 's,^x$,../../outside/secret.txt,RSh', 'x', 'y']);

    const target = join(root, 'unpacked');
    for (const archive of [dotdot, throughLink, hardLink]) {
      const answer = await bytes('PUT', `/v1/files/archive?path=${target}`, { body: archive, contentType: 'application/x-tar', token: CAROL });
      expect(answer.status, answer.bytes.toString()).toBe(200);
      expect(answer.json().warnings.length, answer.bytes.toString()).toBeGreaterThan(0);
    }
    expect(existsSync(join(root, 'escape.txt'))).toBe(false);
    expect(existsSync(join(scratch, 'escape.txt'))).toBe(false);
    expect(readdirSync(outside)).toEqual(['secret.txt']);
    expect(readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('secret\n');
    expect(lstatSync(join(outside, 'secret.txt')).nlink).toBe(1);
  });
});

describe('an owner confined to a root', () => {
  test('cannot make, remove, rename, digest or upload outside it, through links or ..', async () => {
    const as = (name: string, body: Record<string, unknown>) => daemon.request('POST', `/v1/fs/${name}`, { body, token: CAROL });
    for (const answer of [
      await as('mkdir', { path: join(root, 'door', 'made') }),
      await as('mkdir', { path: join(root, '..', 'outside', 'made') }),
      await as('remove', { path: join(root, 'door', 'secret.txt') }),
      await as('rename', { from: join(root, 'door', 'secret.txt'), to: join(root, 'taken.txt') }),
      await as('rename', { from: join(root, 'door'), to: join(root, 'door', 'x') }),
      await as('digest', { path: join(root, 'door', 'secret.txt') }),
      await daemon.request('POST', '/v1/files/uploads', { body: { path: join(root, 'door', 'planted.txt') }, token: CAROL }),
    ]) {
      expect(answer.body.error?.code, JSON.stringify(answer.body)).toBe('FS_PERMISSION_DENIED');
    }
    expect(readdirSync(outside)).toEqual(['secret.txt']);
    // Removing the link itself is hers to do: the link goes, what it leads to stays.
    expect((await as('remove', { path: join(root, 'door') })).body).toEqual({ removed: true });
    expect(lstatSync(join(outside, 'secret.txt')).isFile()).toBe(true);
    symlinkSync(outside, join(root, 'door'));
    // The root itself cannot be removed through a path whose parent lies outside.
    expect((await as('remove', { path: root, recursive: true })).body.error.code).toBe('FS_PERMISSION_DENIED');
    expect(existsSync(root)).toBe(true);
  });
});
