// The entry of a port connector: a process the daemon starts for an owner that
// runs as another OS user, which opens that owner's connections to ports in
// the world (see src/provider/port-connector.ts).
import { load } from './entry.js';

await load('provider/port-connector');
