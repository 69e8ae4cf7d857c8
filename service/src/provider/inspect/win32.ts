/**
 * The Windows inspector. Windows terminal inspection (a Toolhelp32 process
 * table, creation-time identities, taskkill escalation) is not implemented
 * yet: every method throws {@link InspectionUnsupportedError}, so a terminal
 * on Windows fails loudly at allocation instead of running without cleanup.
 * @module
 */
import type { InputWait, ProcessIdentity, ProcessInspector, ProcessRow, TerminalDevice } from './inspector.ts';
import { InspectionUnsupportedError } from './inspector.ts';

function unsupported(): never {
  throw new InspectionUnsupportedError('terminal inspection is not implemented on Windows yet');
}

export class Win32Inspector implements ProcessInspector {
  readonly platform = 'win32' as const;
  readonly exactInputWait = false;
  foregroundGroup(): number | undefined {
    return unsupported();
  }
  terminalDevice(): TerminalDevice {
    return unsupported();
  }
  inputWait(): InputWait | undefined {
    return unsupported();
  }
  identity(): ProcessIdentity | undefined {
    return unsupported();
  }
  snapshot(): ProcessRow[] {
    return unsupported();
  }
  nowTicks(): number | undefined {
    return unsupported();
  }
  isAlive(): boolean {
    return unsupported();
  }
  groupHasLiveMembers(): boolean | undefined {
    return unsupported();
  }
  signalGroup(): void {
    unsupported();
  }
  signalProcess(): boolean {
    return unsupported();
  }
}
