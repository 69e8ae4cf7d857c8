/**
 * The Kubernetes manifests under deploy/k8s: each document parses, the core
 * kinds validate against the Kubernetes API schemas (kubernetes-models), the
 * agent-sandbox kinds against their v1beta1 shape with the pod spec inside
 * them validated as a PodSpec, and all of them name the image, port, probe
 * paths and token file the Dockerfile, the README and the daemon use.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodSpec, Service } from 'kubernetes-models/v1';
import { StatefulSet } from 'kubernetes-models/apps/v1';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { LIVE_PATH, READY_PATH } from '@execworld/sdk/protocol';

const ROOT = join(import.meta.dirname, '../..');
const K8S = join(ROOT, 'deploy/k8s');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'service/package.json'), 'utf8')) as { version: string }).version;
const DOCKERFILE = readFileSync(join(ROOT, 'docker/Dockerfile'), 'utf8');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const IMAGE_PORT = Number(/^EXPOSE (\d+)$/m.exec(DOCKERFILE)![1]);
const IMAGE_TAG = /docker build -f docker\/Dockerfile -t (\S+) \./.exec(README)![1]!;

type Manifest = { apiVersion: string; kind: string; metadata: { name: string }; spec: any };

const manifests: Array<Manifest & { file: string }> = readdirSync(K8S, { recursive: true, encoding: 'utf8' })
  .filter((file) => file.endsWith('.yaml'))
  .sort()
  .flatMap((file) =>
    parseAllDocuments(readFileSync(join(K8S, file), 'utf8')).map((document) => {
      if (document.errors.length > 0) throw new Error(`${file}: ${document.errors.map((error) => error.message).join('; ')}`);
      return { ...(document.toJS() as Manifest), file };
    }),
  );

const ref = z.strictObject({ name: z.string().min(1) });
const metadata = z.object({ name: z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/), labels: z.record(z.string(), z.string()).optional() });
/** agent-sandbox's extensions.agents.x-k8s.io/v1beta1 kinds, as far as these manifests use them (strict: a misspelt field fails). */
const SANDBOX_KINDS = {
  SandboxTemplate: z.strictObject({
    podTemplate: z.strictObject({
      metadata: z.strictObject({ labels: z.record(z.string(), z.string()).optional(), annotations: z.record(z.string(), z.string()).optional() }),
      spec: z.record(z.string(), z.unknown()),
    }),
    networkPolicyManagement: z.enum(['Managed', 'Unmanaged']).optional(),
    networkPolicy: z.strictObject({ ingress: z.array(z.unknown()).optional(), egress: z.array(z.unknown()).optional() }).optional(),
  }),
  SandboxWarmPool: z.strictObject({ replicas: z.number().int().min(0), sandboxTemplateRef: ref }),
  SandboxClaim: z.strictObject({ warmPoolRef: ref }),
};

function validateCore(manifest: Manifest): void {
  const models = { Service, StatefulSet, NetworkPolicy } as const;
  const Model = models[manifest.kind as keyof typeof models];
  if (Model === undefined) throw new Error(`no schema for ${manifest.apiVersion} ${manifest.kind}`);
  new Model(manifest).validate();
}

const byKind = (kind: string): Array<Manifest & { file: string }> => manifests.filter((manifest) => manifest.kind === kind);
const template = (): Manifest => byKind('SandboxTemplate')[0]!;
const statefulSet = (): Manifest => byKind('StatefulSet')[0]!;
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

  it('validates every document against its schema', () => {
    for (const manifest of manifests) {
      if (manifest.apiVersion === 'extensions.agents.x-k8s.io/v1beta1') {
        const schema = SANDBOX_KINDS[manifest.kind as keyof typeof SANDBOX_KINDS];
        expect(schema, `${manifest.file}: ${manifest.kind}`).toBeDefined();
        metadata.parse(manifest.metadata);
        schema.parse(manifest.spec);
      } else {
        validateCore(manifest);
      }
    }
    new PodSpec(template().spec.podTemplate.spec).validate();
    new NetworkPolicy({ metadata: { name: 'probe' }, spec: { podSelector: {}, ingress: template().spec.networkPolicy.ingress } }).validate();
  });

  it('the validation can fail: a wrong type or a misspelt field is refused', () => {
    const broken = structuredClone(template().spec.podTemplate.spec);
    broken.containers[0].ports[0].containerPort = 'eight';
    expect(() => new PodSpec(broken).validate()).toThrow(/containerPort must be integer/);
    expect(() => SANDBOX_KINDS.SandboxWarmPool.parse({ replicas: 1, templateRef: { name: 'execworld' } })).toThrow();
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
    const volume = spec.volumes.find((each: { name: string }) => each.name === mount.name);
    expect(volume.secret).toMatchObject({ secretName: 'execworld-token', defaultMode: 0o440 });
    expect(relative(mount.mountPath, tokenFile)).toBe('token');
  });

  it('admits only the router (agent-sandbox) or labelled clients (plain), on the daemon port alone', () => {
    expect(template().spec.networkPolicyManagement).toBe('Managed');
    expect(template().spec.networkPolicy).toEqual({
      ingress: [{ from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'sandbox-router' } } }], ports: [{ protocol: 'TCP', port: IMAGE_PORT }] }],
    });
    const policy = byKind('NetworkPolicy')[0]!;
    expect(policy.spec.podSelector.matchLabels).toEqual(statefulSet().spec.selector.matchLabels);
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    expect(policy.spec.ingress).toEqual([
      { from: [{ podSelector: { matchLabels: { 'execworld-client': 'true' } } }], ports: [{ protocol: 'TCP', port: IMAGE_PORT }] },
    ]);
  });

  it('the README describes them: the directory, the port and the probe paths', () => {
    expect(README).toContain('deploy/k8s/agent-sandbox/');
    expect(README).toContain('deploy/k8s/plain/');
    for (const text of [LIVE_PATH, READY_PATH, `${IMAGE_PORT}`, 'execworld-token', 'X-Execworld-Token']) expect(README).toContain(text);
  });
});
