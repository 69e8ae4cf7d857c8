import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fresh self-signed certificate for 127.0.0.1 (a day long) and its key, as PEM files. */
export function selfSignedCertificate(): { cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), 'execworld-tls-'));
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  const subject = ['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'];
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', ...subject, '-days', '1', '-keyout', key, '-out', cert],
    {
      stdio: 'ignore',
    },
  );
  return { cert, key };
}
