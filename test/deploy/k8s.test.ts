/**
 * The Kubernetes manifests under deploy/k8s: each document parses; the core
 * kinds validate against the Kubernetes API schemas (kubernetes-models); the
 * agent-sandbox kinds against agent-sandbox's own CRD schemas (vendored in
 * test/deploy/crds/), with an unknown field refused wherever the schema does
 * not keep unknown fields, as the API server's strict field validation does;
 * the network policies admit only the router (or labelled clients) and let
 * the world reach DNS and the internet but no private range; and all of them
 * name the image, port, probe paths and token file the Dockerfile, the
 * deployment guide and the daemon use.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join, relative } from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodSpec, Service } from 'kubernetes-models/v1';
import { StatefulSet } from 'kubernetes-models/apps/v1';
import { parse, parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { LIVE_PATH, READY_PATH } from '@execworld/sdk/protocol';

const ROOT = join(import.meta.dirname, '../..');
const K8S = join(ROOT, 'deploy/k8s');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'service/package.json'), 'utf8')) as { version: string }).version;
const DOCKERFILE = readFileSync(join(ROOT, 'docker/Dockerfile'), 'utf8');
const GUIDE = readFileSync(join(ROOT, 'docs/deploy.md'), 'utf8');
const IMAGE_PORT = Number(/^EXPOSE (\d+)$/m.exec(DOCKERFILE)![1]);
const IMAGE_TAG = /docker build -f docker\/Dockerfile -t (\S+) \./.exec(GUIDE)![1]!;
const SANDBOX_API = 'extensions.agents.x-k8s.io/v1beta1';

type Manifest = { apiVersion: string; kind: string; metadata: { name: string }; spec: any };

const files = readdirSync(K8S, { recursive: true, encoding: 'utf8' })
  .filter((file) => file.endsWith('.yaml'))
  .sort();
const manifests: Array<Manifest & { file: string }> = files.flatMap((file) =>
  parseAllDocuments(readFileSync(join(K8S, file), 'utf8')).map((document) => {
    if (document.errors.length > 0) throw new Error(`${file}: ${document.errors.map((error) => error.message).join('; ')}`);
    return { ...(document.toJS() as Manifest), file };
  }),
);

// ---- agent-sandbox's CRD schemas, strict ----

type Schema = Record<string, any>;

/**
 * `schema` as the API server applies it with strict field validation: an
 * object that lists its fields, or lists none and keeps no map, takes no
 * other field (the server would prune it, and strict validation refuses it)
 * unless it says x-kubernetes-preserve-unknown-fields. The root's
 * `metadata` is ObjectMeta, which the server checks itself: see OBJECT_META.
 */
function strict(schema: Schema, root = true): Schema {
  const copy: Schema = { ...schema };
  if (copy.properties !== undefined) {
    copy.properties = Object.fromEntries(
      Object.entries(copy.properties as Record<string, Schema>).map(([name, inner]) => [
        name,
        root && name === 'metadata' ? { type: 'object' } : strict(inner, false),
      ]),
    );
  }
  if (copy.items !== undefined) copy.items = strict(copy.items as Schema, false);
  if (typeof copy.additionalProperties === 'object') copy.additionalProperties = strict(copy.additionalProperties as Schema, false);
  for (const key of ['anyOf', 'allOf', 'oneOf'] as const)
    if (Array.isArray(copy[key])) copy[key] = (copy[key] as Schema[]).map((inner) => strict(inner, false));
  const isObject = copy.type === 'object' || copy.properties !== undefined;
  if (isObject && copy.additionalProperties === undefined && copy['x-kubernetes-preserve-unknown-fields'] !== true) copy.additionalProperties = false;
  return copy;
}

/** The vendored CRD schemas by kind, and what they say of themselves. */
const CRDS = new Map(
  readdirSync(join(import.meta.dirname, 'crds'))
    .filter((file) => file.endsWith('.yaml'))
    .map((file) => {
      const text = readFileSync(join(import.meta.dirname, 'crds', file), 'utf8');
      const crd = parse(text) as { kind: string; apiVersion: string; openAPIV3Schema: Schema };
      return [crd.kind, { ...crd, file, header: text.slice(0, text.indexOf('\nkind:')) }] as const;
    }),
);

const ajv = new Ajv({ allErrors: true, strictTypes: false, strictTuples: false, strictRequired: false });
// Annotations of the Kubernetes structural schema; list-type map and set are checked below, CEL rules are not.
ajv.addVocabulary([
  'x-kubernetes-int-or-string',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-map-type',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-embedded-resource',
  'x-kubernetes-validations',
]);
ajv.addKeyword({
  keyword: 'x-kubernetes-list-type',
  type: 'array',
  schemaType: 'string',
  // A set holds no value twice; a map no two items with the same keys (their defaults filled in, as the server does).
  validate: (listType: string, data: unknown[], parentSchema?: Schema) => {
    if (listType === 'atomic') return true;
    const keys = (parentSchema?.['x-kubernetes-list-map-keys'] as string[] | undefined) ?? [];
    const defaults = (parentSchema?.items?.properties ?? {}) as Record<string, Schema>;
    const identity = (item: any): string =>
      listType === 'set' ? JSON.stringify(item) : JSON.stringify(keys.map((key) => item?.[key] ?? defaults[key]?.default));
    return new Set(data.map(identity)).size === data.length;
  },
});
ajv.addFormat('int32', { type: 'number', validate: (value: number) => Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31 });
ajv.addFormat('int64', { type: 'number', validate: (value: number) => Number.isSafeInteger(value) });
ajv.addFormat('date-time', (value: string) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(value));

const validators = new Map([...CRDS].map(([kind, crd]) => [kind, ajv.compile(strict(crd.openAPIV3Schema))]));

/** The ObjectMeta fields these manifests use, strict as the server is, and a DNS-1123 name. */
const OBJECT_META = z.strictObject({
  name: z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/),
  namespace: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
});

/** What is wrong with an agent-sandbox object: one line per fault, each with the path of the field. */
function sandboxFaults(document: Manifest): string[] {
  // The file a manifest came from is this test's note, not a field.
  const { file: _file, ...manifest } = document as Manifest & { file?: string };
  const validate = validators.get(manifest.kind);
  if (manifest.apiVersion !== SANDBOX_API || validate === undefined) return [`no CRD schema for ${manifest.apiVersion} ${manifest.kind}`];
  const { kind } = manifest;
  const meta = OBJECT_META.safeParse(manifest.metadata);
  const faults = meta.success ? [] : meta.error.issues.map((issue) => `/metadata/${issue.path.join('/')} ${issue.message}`);
  if (!validate(manifest)) {
    faults.push(
      ...(validate.errors ?? []).map((error: ErrorObject) =>
        error.keyword === 'additionalProperties'
          ? `${error.instancePath}/${String(error.params.additionalProperty)} is not a field of ${kind}`
          : `${error.instancePath} ${error.message ?? error.keyword}`,
      ),
    );
  }
  return faults;
}

function validateCore(manifest: Manifest): void {
  const models = { Service, StatefulSet, NetworkPolicy } as const;
  const Model = models[manifest.kind as keyof typeof models];
  if (Model === undefined) throw new Error(`no schema for ${manifest.apiVersion} ${manifest.kind}`);
  new Model(manifest).validate();
}

// ---- what a NetworkPolicy's rules let through ----

type Labels = Record<string, string>;
/** Where traffic goes to (egress) or comes from (ingress): an address outside the cluster's pods, or a pod. */
type Peer = { ip: string } | { namespace: string; labels: Labels };
type Rule = { to?: any[]; from?: any[]; ports?: Array<{ protocol?: string; port?: number; endPort?: number }> };

/** An IPv4 or IPv6 address as a number, and its width in bits. */
function address(ip: string): { value: bigint; bits: number } {
  if (isIP(ip) === 4) return { value: ip.split('.').reduce((sum, part) => (sum << 8n) | BigInt(part), 0n), bits: 32 };
  if (isIP(ip) !== 6) throw new Error(`${ip} is not an address`);
  const [head, tail] = ip.includes('::') ? ip.split('::') : [ip, undefined];
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return { value: groups.reduce((sum, group) => (sum << 16n) | BigInt(`0x${group}`), 0n), bits: 128 };
}

function inCidr(ip: string, cidr: string): boolean {
  const [base, length] = cidr.split('/');
  const one = address(ip);
  const net = address(base!);
  if (one.bits !== net.bits) return false;
  const shift = BigInt(net.bits - Number(length));
  return one.value >> shift === net.value >> shift;
}

const selects = (selector: { matchLabels?: Labels } | undefined, labels: Labels): boolean =>
  selector !== undefined && Object.entries(selector.matchLabels ?? {}).every(([key, value]) => labels[key] === value);

/** Whether the peer entry `entry` (an ipBlock, or namespace and pod selectors) matches `peer`; a pod selector alone means the policy's own namespace. */
function peerMatches(entry: any, peer: Peer, ownNamespace: string): boolean {
  if ('ip' in peer)
    return entry.ipBlock !== undefined && inCidr(peer.ip, entry.ipBlock.cidr) && !(entry.ipBlock.except ?? []).some((cidr: string) => inCidr(peer.ip, cidr));
  if (entry.ipBlock !== undefined) return false;
  const namespaceOk =
    entry.namespaceSelector === undefined
      ? peer.namespace === ownNamespace
      : selects(entry.namespaceSelector, { 'kubernetes.io/metadata.name': peer.namespace });
  return namespaceOk && (entry.podSelector === undefined || selects(entry.podSelector, peer.labels));
}

/** Whether one of `rules` lets `protocol`/`port` traffic through with `peer`. */
function allows(rules: Rule[], direction: 'to' | 'from', peer: Peer, protocol: string, port: number, ownNamespace = 'worlds'): boolean {
  return rules.some((rule) => {
    const peers = rule[direction];
    const peerOk = peers === undefined || peers.length === 0 || peers.some((entry) => peerMatches(entry, peer, ownNamespace));
    const portOk =
      rule.ports === undefined ||
      rule.ports.length === 0 ||
      rule.ports.some(
        (each) => (each.protocol ?? 'TCP') === protocol && (each.port === undefined || (port >= each.port && port <= (each.endPort ?? each.port))),
      );
    return peerOk && portOk;
  });
}

const byKind = (kind: string): Array<Manifest & { file: string }> => manifests.filter((manifest) => manifest.kind === kind);
const template = (): Manifest => byKind('SandboxTemplate')[0]!;
const statefulSet = (): Manifest => byKind('StatefulSet')[0]!;
const plainPolicy = (): Manifest => byKind('NetworkPolicy')[0]!;
const podSpecs = (): Array<{ where: string; spec: any }> => [
  { where: 'SandboxTemplate', spec: template().spec.podTemplate.spec },
  { where: 'StatefulSet', spec: statefulSet().spec.template.spec },
];

describe('deploy/k8s', () => {
  it('has the agent-sandbox template, warm pool and claim, and the plain world', () => {
    expect(manifests.map(({ file, kind }) => `${file} ${kind}`)).toEqual([
      'agent-sandbox/sandbox-claim.yaml SandboxClaim',
      'agent-sandbox/sandbox-template.yaml SandboxTemplate',
      'agent-sandbox/sandbox-warm-pool.yaml SandboxWarmPool',
      'plain/world.yaml Service',
      'plain/world.yaml StatefulSet',
      'plain/world.yaml NetworkPolicy',
    ]);
  });

  it('vendors the CRD schemas of agent-sandbox as data, each naming its source, commit and license', () => {
    expect([...CRDS.keys()].sort()).toEqual(['SandboxClaim', 'SandboxTemplate', 'SandboxWarmPool']);
    for (const crd of CRDS.values()) {
      expect(crd.apiVersion).toBe(SANDBOX_API);
      expect(crd.header).toMatch(/https:\/\/github\.com\/kubernetes-sigs\/agent-sandbox/);
      expect(crd.header).toMatch(/file k8s\/crds\/extensions\.agents\.x-k8s\.io_\w+\.yaml/);
      expect(crd.header).toMatch(/at commit [0-9a-f]{40}/);
      expect(crd.header).toMatch(/Apache License, Version 2\.0/);
    }
  });

  it('validates every document against its schema: the agent-sandbox kinds against their CRDs, unknown fields refused', () => {
    for (const manifest of manifests) {
      if (manifest.apiVersion === SANDBOX_API) expect(sandboxFaults(manifest), `${manifest.file}: ${manifest.kind}`).toEqual([]);
      else validateCore(manifest);
    }
    new PodSpec(template().spec.podTemplate.spec).validate();
    const { ingress, egress } = template().spec.networkPolicy;
    new NetworkPolicy({ metadata: { name: 'probe' }, spec: { podSelector: {}, ingress, egress } }).validate();
  });

  it("holds the plain world's pod spec and policy rules to the same strict schemas", () => {
    // The CRD's pod spec and rule schemas are Kubernetes' own PodSpec and NetworkPolicy rules, expanded: the plain world's go through them.
    const probe = (spec: any): string[] => sandboxFaults({ ...template(), spec: { ...template().spec, ...spec } });
    expect(probe({ podTemplate: { ...template().spec.podTemplate, spec: statefulSet().spec.template.spec } })).toEqual([]);
    expect(probe({ networkPolicy: { ingress: plainPolicy().spec.ingress, egress: plainPolicy().spec.egress } })).toEqual([]);
  });

  it('the validation can fail: a misspelt field at any depth, a wrong type or a value out of the enum is refused, naming the field', () => {
    const misspelt = (change: (spec: any) => void, kind = 'SandboxTemplate'): string[] => {
      const manifest = structuredClone(byKind(kind)[0]!);
      change(manifest.spec);
      return sandboxFaults(manifest);
    };
    expect(misspelt((spec) => (spec.networkPolcy = spec.networkPolicy))).toEqual(['/spec/networkPolcy is not a field of SandboxTemplate']);
    expect(misspelt((spec) => (spec.podTemplate.spec.containers[0].imagePullPolcy = 'Always'))).toEqual([
      '/spec/podTemplate/spec/containers/0/imagePullPolcy is not a field of SandboxTemplate',
    ]);
    expect(misspelt((spec) => (spec.networkPolicy.egress[1].to[0].ipblock = spec.networkPolicy.egress[1].to[0].ipBlock))).toEqual([
      '/spec/networkPolicy/egress/1/to/0/ipblock is not a field of SandboxTemplate',
    ]);
    expect(misspelt((spec) => (spec.podTemplate.metadata.label = {}))).toEqual(['/spec/podTemplate/metadata/label is not a field of SandboxTemplate']);
    expect(misspelt((spec) => (spec.podTemplate.spec.containers[0].ports[0].containerPort = 'eight'))).toEqual([
      '/spec/podTemplate/spec/containers/0/ports/0/containerPort must be integer',
    ]);
    expect(misspelt((spec) => (spec.networkPolicyManagement = 'Manged'))).toEqual(['/spec/networkPolicyManagement must be equal to one of the allowed values']);
    expect(misspelt((spec) => spec.podTemplate.spec.containers[0].ports.push({ ...spec.podTemplate.spec.containers[0].ports[0], name: 'again' }))).toEqual([
      '/spec/podTemplate/spec/containers/0/ports must pass "x-kubernetes-list-type" keyword validation',
    ]);
    expect(misspelt((spec) => (spec.templateRef = spec.sandboxTemplateRef), 'SandboxWarmPool')).toEqual([
      '/spec/templateRef is not a field of SandboxWarmPool',
    ]);
    expect(misspelt((spec) => (spec.warmpoolRef = spec.warmPoolRef), 'SandboxClaim')).toEqual(['/spec/warmpoolRef is not a field of SandboxClaim']);
    expect(sandboxFaults({ ...template(), metadata: { name: 'execworld', lables: {} } as any })).toEqual(['/metadata/ Unrecognized key: "lables"']);
    const broken = structuredClone(template().spec.podTemplate.spec);
    broken.containers[0].ports[0].containerPort = 'eight';
    expect(() => new PodSpec(broken).validate()).toThrow(/containerPort must be integer/);
  });

  it('names only files that exist in its comments', () => {
    const named = new Map<string, string[]>();
    for (const file of files) {
      const comments = readFileSync(join(K8S, file), 'utf8')
        .split('\n')
        .filter((line) => line.trimStart().startsWith('#'))
        .join('\n');
      named.set(
        file,
        [...comments.matchAll(/(?:[\w.-]+\/)*[\w.-]+\.(?:yaml|ts|md)\b|docker\/Dockerfile/g)].map((match) => match[0]),
      );
    }
    // Relative to deploy/k8s, or to the repository.
    for (const [file, paths] of named) {
      for (const path of paths) expect(existsSync(join(K8S, path)) || existsSync(join(ROOT, path)), `${file} names ${path}`).toBe(true);
    }
    expect(named.get('agent-sandbox/sandbox-template.yaml')).toContain('plain/world.yaml');
    expect(named.get('plain/world.yaml')).toContain('agent-sandbox/sandbox-template.yaml');
  });

  it('the warm pool and the claim name what exists', () => {
    const pool = byKind('SandboxWarmPool')[0]!;
    expect(pool.spec.sandboxTemplateRef.name).toBe(template().metadata.name);
    expect(byKind('SandboxClaim')[0]!.spec.warmPoolRef.name).toBe(pool.metadata.name);
    const service = byKind('Service')[0]!;
    expect(service.spec.clusterIP).toBe('None');
    expect(statefulSet().spec.serviceName).toBe(service.metadata.name);
    expect(service.spec.selector).toEqual(statefulSet().spec.selector.matchLabels);
    expect(statefulSet().spec.template.metadata.labels).toMatchObject(statefulSet().spec.selector.matchLabels);
  });

  it('runs one pod spec either way: the image, its port, the probes, the token from a Secret, no root and no API credentials', () => {
    const [sandbox, plain] = podSpecs();
    expect(plain!.spec).toEqual(sandbox!.spec);
    const spec = sandbox!.spec;
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 });
    expect(spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(30);
    const [container] = spec.containers;
    expect(container.image).toBe(`${IMAGE_TAG.split(':')[0]}:${VERSION}`);
    expect(IMAGE_TAG).toBe(`execworld:${VERSION}`);
    expect(container.ports).toEqual([{ name: 'http', containerPort: IMAGE_PORT, protocol: 'TCP' }]);
    expect(IMAGE_PORT).toBe(8888);
    expect(container.livenessProbe.httpGet).toEqual({ path: LIVE_PATH, port: 'http' });
    expect(container.readinessProbe.httpGet).toEqual({ path: READY_PATH, port: 'http' });
    expect(container.securityContext).toMatchObject({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    expect(container.resources.limits).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    const tokenFile = container.env.find((variable: { name: string }) => variable.name === 'EXECWORLD_TOKEN_FILE').value as string;
    const mount = container.volumeMounts.find((each: { mountPath: string }) => tokenFile.startsWith(`${each.mountPath}/`));
    expect(mount.readOnly).toBe(true);
    const volume = spec.volumes.find((each: { name: string }) => each.name === mount.name);
    // 0440 with fsGroup: root's file, readable by the pod's group, which the daemon (test/deploy/token-secret.test.ts) takes.
    expect(volume.secret).toMatchObject({ secretName: 'execworld-token', defaultMode: 0o440 });
    expect(spec.securityContext.fsGroup).toBe(spec.securityContext.runAsGroup);
    expect(relative(mount.mountPath, tokenFile)).toBe('token');
  });

  it('admits only the sandbox-router from agent-sandbox-system (agent-sandbox) or labelled clients (plain), on the daemon port alone', () => {
    expect(template().spec.networkPolicyManagement).toBe('Managed');
    const ingress = template().spec.networkPolicy.ingress as Rule[];
    const system = 'agent-sandbox-system';
    // The router of agent-sandbox's own default policy (app: sandbox-router) and its Go router's label.
    expect(allows(ingress, 'from', { namespace: system, labels: { app: 'sandbox-router' } }, 'TCP', IMAGE_PORT)).toBe(true);
    expect(allows(ingress, 'from', { namespace: system, labels: { 'app.kubernetes.io/name': 'sandbox-router' } }, 'TCP', IMAGE_PORT)).toBe(true);
    expect(allows(ingress, 'from', { namespace: system, labels: { app: 'sandbox-router' } }, 'TCP', 22)).toBe(false);
    expect(allows(ingress, 'from', { namespace: system, labels: { app: 'agent-sandbox-controller' } }, 'TCP', IMAGE_PORT)).toBe(false);
    expect(allows(ingress, 'from', { namespace: 'worlds', labels: { app: 'sandbox-router' } }, 'TCP', IMAGE_PORT)).toBe(false);
    expect(allows(ingress, 'from', { ip: '203.0.113.7' }, 'TCP', IMAGE_PORT)).toBe(false);
    for (const rule of ingress)
      for (const peer of rule.from!) expect(peer.namespaceSelector).toEqual({ matchLabels: { 'kubernetes.io/metadata.name': system } });

    const policy = plainPolicy();
    expect(policy.spec.podSelector.matchLabels).toEqual(statefulSet().spec.selector.matchLabels);
    expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(allows(policy.spec.ingress, 'from', { namespace: 'worlds', labels: { 'execworld-client': 'true' } }, 'TCP', IMAGE_PORT)).toBe(true);
    expect(allows(policy.spec.ingress, 'from', { namespace: 'elsewhere', labels: { 'execworld-client': 'true' } }, 'TCP', IMAGE_PORT)).toBe(false);
    expect(allows(policy.spec.ingress, 'from', { namespace: 'worlds', labels: { app: 'other' } }, 'TCP', IMAGE_PORT)).toBe(false);
  });

  it('lets the world reach the cluster DNS and the internet, but no private range and not the metadata address, either way', () => {
    const egress = template().spec.networkPolicy.egress as Rule[];
    // An empty egress list blocks everything: agent-sandbox writes the policy with both types.
    expect(egress.length).toBeGreaterThan(0);
    expect(plainPolicy().spec.egress).toEqual(egress);
    const dns = { namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns' } };
    expect(allows(egress, 'to', dns, 'UDP', 53)).toBe(true);
    expect(allows(egress, 'to', dns, 'TCP', 53)).toBe(true);
    expect(allows(egress, 'to', dns, 'TCP', 8080)).toBe(false);
    expect(allows(egress, 'to', { namespace: 'kube-system', labels: { component: 'etcd' } }, 'TCP', 2379)).toBe(false);
    expect(allows(egress, 'to', { namespace: 'worlds', labels: { 'app.kubernetes.io/name': 'execworld' } }, 'TCP', IMAGE_PORT)).toBe(false);
    for (const [ip, protocol, port] of [
      ['93.184.215.14', 'TCP', 443],
      ['151.101.0.223', 'TCP', 443],
      ['8.8.8.8', 'UDP', 53],
      ['140.82.112.3', 'TCP', 22],
      ['172.32.0.1', 'TCP', 80],
      ['100.128.0.1', 'TCP', 80],
      ['11.0.0.1', 'TCP', 80],
      ['2606:4700:4700::1111', 'TCP', 443],
      ['2a04:4e42::223', 'TCP', 443],
    ] as const) {
      expect({ ip, allowed: allows(egress, 'to', { ip }, protocol, port) }).toEqual({ ip, allowed: true });
    }
    for (const ip of [
      '169.254.169.254',
      '169.254.20.10',
      '10.0.0.1',
      '10.96.0.10',
      '10.255.255.255',
      '172.16.0.1',
      '172.31.255.254',
      '192.168.1.1',
      '100.64.0.1',
      '100.127.255.254',
      'fd00::1',
      'fd00:ec2::254',
      'fc00::1',
      'fe80::1',
    ]) {
      for (const [protocol, port] of [
        ['TCP', 80],
        ['TCP', 443],
        ['UDP', 53],
      ] as const) {
        expect({ ip, port, allowed: allows(egress, 'to', { ip }, protocol, port) }).toEqual({ ip, port, allowed: false });
      }
    }
  });

  it('the deployment guide describes them: the directories, the port, the probe paths, the token and the egress', () => {
    expect(GUIDE).toContain('deploy/k8s/agent-sandbox/');
    expect(GUIDE).toContain('deploy/k8s/plain/');
    for (const text of [
      LIVE_PATH,
      READY_PATH,
      `${IMAGE_PORT}`,
      'execworld-token',
      'X-Execworld-Token',
      'agent-sandbox-system',
      '169.254.169.254',
      '--sandbox',
    ]) {
      expect(GUIDE).toContain(text);
    }
    for (const rule of template().spec.networkPolicy.egress as Rule[]) {
      for (const peer of rule.to ?? []) for (const cidr of [peer.ipBlock?.cidr, ...(peer.ipBlock?.except ?? [])].filter(Boolean)) expect(GUIDE).toContain(cidr);
    }
    // Its shell examples need a cluster or a Docker engine: none is fenced as a block the docs test runs.
    expect(GUIDE).not.toMatch(/```(sh|ts)\n/);
  });
});
