/**
 * The @deepseek-ai packages call Promise.withResolvers, which Node 20 lacks.
 * Import this first in any test that loads them.
 */
interface WithResolvers {
  withResolvers<T>(): { promise: Promise<T>; resolve: (value: T | PromiseLike<T>) => void; reject: (reason?: unknown) => void };
}

const PromiseWithResolvers = Promise as unknown as Partial<WithResolvers>;
PromiseWithResolvers.withResolvers ??= function withResolvers<T>() {
  let resolve!: (value: T | PromiseLike<T>) => void;
  let reject!: (reason?: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
};
