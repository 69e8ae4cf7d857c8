/**
 * The seam types must stay structurally identical to @deepseek-ai/dsh-subprocess:
 * each of ours is assigned to theirs and back, and compared for equality, so any
 * drift fails the type-check. Vitest runs this file as a type test
 * (`typecheck` in vitest.config.ts): a type error here is a failed test.
 */
import type * as Theirs from '@deepseek-ai/dsh-subprocess';
import { describe, expectTypeOf, it } from 'vitest';
import type * as Ours from '@execworld/sdk/seam';

type TheirRuntime = Pick<Theirs.SubprocessRuntime, 'resolveExecutable' | 'spawn' | 'spawnTerminal'>;

/** Compiles only when A and B are assignable to each other. */
function mutual<A, B>(_check: [A] extends [B] ? ([B] extends [A] ? true : false) : false): void {}

describe('seam types', () => {
  it('are mutually assignable with @deepseek-ai/dsh-subprocess', () => {
    mutual<Ours.SubprocessSpawnSpec, Theirs.SubprocessSpawnSpec>(true);
    mutual<Ours.SubprocessHandle, Theirs.SubprocessHandle>(true);
    mutual<Ours.SubprocessTerminalSpawnSpec, Theirs.SubprocessTerminalSpawnSpec>(true);
    mutual<Ours.SubprocessTerminalHandle, Theirs.SubprocessTerminalHandle>(true);
    mutual<Ours.SubprocessTerminalForeground, Theirs.SubprocessTerminalForeground>(true);
    mutual<Ours.SubprocessTerminalSignal, Theirs.SubprocessTerminalSignal>(true);
    mutual<Ours.SubprocessOutcome, Theirs.SubprocessOutcome>(true);
    mutual<Ours.SubprocessStdio, Theirs.SubprocessStdio>(true);
    mutual<Ours.SubprocessStdinMode, Theirs.SubprocessStdinMode>(true);
    mutual<Ours.SubprocessOutputMode, Theirs.SubprocessOutputMode>(true);
    mutual<Ours.SubprocessCollect, Theirs.SubprocessCollect>(true);
    mutual<Ours.SubprocessOutputRead, Theirs.SubprocessOutputRead>(true);
    mutual<Ours.SubprocessOutputReader, Theirs.SubprocessOutputReader>(true);
    mutual<Ours.SubprocessCollectedOutputs, Theirs.SubprocessCollectedOutputs>(true);
    mutual<Ours.CollectedOutput, Theirs.CollectedOutput>(true);
    mutual<Ours.DshEnvironment, Theirs.DshEnvironment>(true);
    mutual<Ours.DshEnvironmentKey, Theirs.DshEnvironmentKey>(true);
    mutual<Ours.SubprocessRuntime, TheirRuntime>(true);
  });

  it('are equal to @deepseek-ai/dsh-subprocess member by member', () => {
    expectTypeOf<Ours.SubprocessSpawnSpec>().toEqualTypeOf<Theirs.SubprocessSpawnSpec>();
    expectTypeOf<Ours.SubprocessHandle>().toEqualTypeOf<Theirs.SubprocessHandle>();
    expectTypeOf<Ours.SubprocessTerminalSpawnSpec>().toEqualTypeOf<Theirs.SubprocessTerminalSpawnSpec>();
    expectTypeOf<Ours.SubprocessTerminalHandle>().toEqualTypeOf<Theirs.SubprocessTerminalHandle>();
    expectTypeOf<Ours.SubprocessTerminalForeground>().toEqualTypeOf<Theirs.SubprocessTerminalForeground>();
    expectTypeOf<Ours.SubprocessTerminalSignal>().toEqualTypeOf<Theirs.SubprocessTerminalSignal>();
    expectTypeOf<Ours.SubprocessOutcome>().toEqualTypeOf<Theirs.SubprocessOutcome>();
    expectTypeOf<Ours.SubprocessStdio>().toEqualTypeOf<Theirs.SubprocessStdio>();
    expectTypeOf<Ours.SubprocessOutputRead>().toEqualTypeOf<Theirs.SubprocessOutputRead>();
    expectTypeOf<Ours.SubprocessCollectedOutputs>().toEqualTypeOf<Theirs.SubprocessCollectedOutputs>();
    expectTypeOf<Ours.CollectedOutput>().toEqualTypeOf<Theirs.CollectedOutput>();
    expectTypeOf<Ours.SubprocessRuntime>().toEqualTypeOf<TheirRuntime>();
  });
});
