// Waiting in unit tests for work that a fake clock's step() set going (callbacks, file I/O) to
// reach a point: `until(done)` lets the event loop and the I/O threads run, a millisecond at a
// time, until `done()` holds; it fails naming `what` if that takes more than 10 s.

export async function until(
  what: string,
  done: () => boolean | Promise<boolean>,
  limitMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`still waiting for ${what} after ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 1));
  }
}
