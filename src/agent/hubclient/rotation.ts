// The credential part of a hub session (docs/protocol.md, "Rotating the node credential"): when
// the hub's welcome says when to renew, it waits that long on the session's timers, asks with
// credential.request, saves the credential the hub answers with (atomically, 0600, by `save`)
// and only then sends credential.saved, so that the hub forgets the old credential only once the
// new one is on disk. A crash or a lost connection between the steps costs nothing: the old
// credential keeps working and the next session asks again.
// Invariants: at most one renewal timer is pending; nothing is sent before welcome or after the
// connection ended (the connection's timers are cancelled with it).
import type { CredentialMessage, Welcome } from "../../protocol/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";

/** The part of the connection the renewal uses. */
interface RenewalConnection {
  setTimer(ms: number, fn: () => void): () => void;
  sendJson(message: object): boolean;
}

export interface RenewalDeps {
  conn: RenewalConnection;
  clock: Clock;
  log: Logger;
  /** Saves `credential` as the one to connect with from now on; throws when it cannot. */
  save(credential: string): void;
  /** How long to wait before asking again after an unanswered request or a failed save. */
  retryMs?: number;
}

/** Timers longer than this are re-armed (a JS timer cannot wait 2^31 ms or more). */
const MAX_TIMER_MS = 6 * 3_600_000;
const DEFAULT_RETRY_MS = 3_600_000;

export class CredentialRenewal {
  /** When to send credential.request (ms, the clock's); undefined: nothing scheduled. */
  private dueAt: number | undefined;
  /** The pending timer's cancel. */
  private cancel: (() => void) | undefined;
  private readonly retryMs: number;

  constructor(private readonly deps: RenewalDeps) {
    this.retryMs = deps.retryMs ?? DEFAULT_RETRY_MS;
  }

  /** The hub welcomed the session; a hub that says nothing of the credential is never asked. */
  welcomed(w: Welcome): void {
    if (w.credential === undefined) return;
    this.deps.log.debug("node credential", w.credential);
    this.schedule(w.credential.renewInMs);
  }

  /** The hub sent a new credential: save it, then tell the hub it may forget the old one. */
  received(m: CredentialMessage): void {
    try {
      this.deps.save(m.credential);
    } catch (err) {
      this.deps.log.error("cannot save the new node credential; the old one keeps working", {
        error: err,
        retryInMs: this.retryMs,
      });
      this.schedule(this.retryMs);
      return;
    }
    this.deps.conn.sendJson({ type: "credential.saved" });
    this.deps.log.info("rotated the node credential", { expiresAt: m.expiresAt });
    this.schedule(m.renewInMs);
  }

  private schedule(inMs: number): void {
    this.cancel?.();
    this.dueAt = this.deps.clock.now() + inMs;
    this.arm();
  }

  private arm(): void {
    const due = this.dueAt;
    if (due === undefined) return;
    const wait = Math.max(0, Math.min(due - this.deps.clock.now(), MAX_TIMER_MS));
    this.cancel = this.deps.conn.setTimer(wait, () => this.tick());
  }

  /** The timer fired: ask when due, else wait on (a long wait is made of several timers). */
  private tick(): void {
    this.cancel = undefined;
    if (this.dueAt === undefined) return;
    if (this.deps.clock.now() < this.dueAt) {
      this.arm();
      return;
    }
    this.deps.log.info("asking the hub for a new node credential");
    this.deps.conn.sendJson({ type: "credential.request" });
    this.schedule(this.retryMs);
  }
}
