// systemd's unit manager (org.freedesktop.systemd1.Manager) over a D-Bus connection: starting
// transient units and waiting for their jobs, stopping them, setting their properties, reading
// their state. A start or a stop returns a job; systemd tells its end in the JobRemoved signal
// (id, job path, unit, result), which it sends only to clients that called Subscribe, so the
// manager subscribes once when it is made.
//
// Invariants: every JobRemoved seen is either handed to the waiter of its job or kept in
// `recent` (bounded), so a signal that comes before the reply that names its job is not lost;
// every wait has a deadline.
import { abortReason, type Clock } from "../clock.ts";
import { type CallOptions, type DBusConnection, DBusError, type MethodCall } from "./connection.ts";
import type { Message } from "./message.ts";
import type { DBusValue } from "./types.ts";
import { Variant } from "./types.ts";
import type { UnitProperty } from "./unit-properties.ts";

export const SYSTEMD = {
  destination: "org.freedesktop.systemd1",
  path: "/org/freedesktop/systemd1",
  interface: "org.freedesktop.systemd1.Manager",
} as const;

/** The error systemd answers for a unit it does not have loaded. */
export const NO_SUCH_UNIT = "org.freedesktop.systemd1.NoSuchUnit";
/** The error systemd answers when a transient unit's name is taken. */
export const UNIT_EXISTS = "org.freedesktop.systemd1.UnitExists";

const RECENT_JOBS = 256;

export interface SystemdManagerDeps {
  conn: DBusConnection;
  clock: Clock;
  /** Deadline of each call to systemd. */
  callTimeoutMs: number;
  /** Deadline for a job (a start or stop) to end once systemd has queued it. */
  jobTimeoutMs: number;
}

/** A call's options: the caller may abort; the deadline is the manager's. */
export interface Abortable {
  signal?: AbortSignal;
}

export class SystemdManager {
  /** Waiters for the end of a job, by job path. */
  private readonly waiters = new Map<string, (result: string) => void>();
  /** Results of ended jobs nobody waited for yet, oldest first. */
  private readonly recent = new Map<string, string>();
  private readonly stopListening: () => void;

  private constructor(private readonly deps: SystemdManagerDeps) {
    this.stopListening = deps.conn.onSignal((m) => this.onSignal(m));
  }

  /** Listens for JobRemoved (AddMatch on a bus; a peer-to-peer connection gets it anyway)
   * and subscribes to systemd's signals. */
  static async create(deps: SystemdManagerDeps, opts: Abortable = {}): Promise<SystemdManager> {
    const m = new SystemdManager(deps);
    const call = { timeoutMs: deps.callTimeoutMs, signal: opts.signal };
    try {
      if (deps.conn.uniqueName !== undefined) {
        const rule = `type='signal',sender='${SYSTEMD.destination}',interface='${SYSTEMD.interface}',member='JobRemoved'`;
        await deps.conn.addMatch(rule, call);
      }
      await deps.conn.call({ ...SYSTEMD, member: "Subscribe" }, call);
    } catch (e) {
      m.stopListening();
      throw e;
    }
    return m;
  }

  private onSignal(m: Message): void {
    if (m.interface !== SYSTEMD.interface || m.member !== "JobRemoved" || m.signature !== "uoss")
      return;
    const [, job, , result] = m.body as [number, string, string, string];
    const waiter = this.waiters.get(job);
    if (waiter !== undefined) {
      waiter(result);
      return;
    }
    this.recent.set(job, result);
    if (this.recent.size > RECENT_JOBS) this.recent.delete(this.recent.keys().next().value ?? "");
  }

  private call(c: Omit<MethodCall, "destination">, opts: Abortable): Promise<Message> {
    const call: CallOptions = { timeoutMs: this.deps.callTimeoutMs, signal: opts.signal };
    return this.deps.conn.call({ destination: SYSTEMD.destination, ...c }, call);
  }

  private manager(member: string, signature: string, body: DBusValue[], opts: Abortable) {
    return this.call(
      { path: SYSTEMD.path, interface: SYSTEMD.interface, member, signature, body },
      opts,
    );
  }

  /** Resolves with the result of job `job` ("done", "failed", "canceled", "timeout",
   * "dependency", "skipped") once it ends; rejects after jobTimeoutMs or if `signal` aborts. */
  private waitJob(job: string, what: string, opts: Abortable): Promise<string> {
    const seen = this.recent.get(job);
    if (seen !== undefined) {
      this.recent.delete(job);
      return Promise.resolve(seen);
    }
    return new Promise((resolve, reject) => {
      const finish = (fn: () => void) => {
        this.waiters.delete(job);
        cancelTimer();
        opts.signal?.removeEventListener("abort", onAbort);
        fn();
      };
      const onAbort = () => finish(() => reject(abortReason(opts.signal as AbortSignal)));
      const cancelTimer = this.deps.clock.setTimer(this.deps.jobTimeoutMs, () =>
        finish(() =>
          reject(new Error(`${what}: job ${job} did not end within ${this.deps.jobTimeoutMs} ms`)),
        ),
      );
      this.waiters.set(job, (result) => finish(() => resolve(result)));
      if (opts.signal?.aborted) return onAbort();
      opts.signal?.addEventListener("abort", onAbort);
    });
  }

  /** Starts transient unit `name` (mode "replace") with `properties` and waits for its job;
   * throws naming the unit and the job's result if that is not "done". A name in use rejects
   * with a DBusError of UNIT_EXISTS. */
  async startTransientUnit(
    name: string,
    properties: UnitProperty[],
    opts: Abortable = {},
  ): Promise<void> {
    const reply = await this.manager(
      "StartTransientUnit",
      "ssa(sv)a(sa(sv))",
      [name, "replace", properties, []],
      opts,
    );
    const what = `Cannot start systemd unit ${JSON.stringify(name)}`;
    const result = await this.waitJob(String(reply.body[0]), what, opts);
    if (result !== "done") throw new Error(`${what}: its job ended "${result}"`);
  }

  /** Stops unit `name` (mode "replace") and waits for its job; a unit systemd does not have is
   * already stopped. Throws naming the unit and result if the job did not end "done". */
  async stopUnit(name: string, opts: Abortable = {}): Promise<void> {
    let reply: Message;
    try {
      reply = await this.manager("StopUnit", "ss", [name, "replace"], opts);
    } catch (e) {
      if (e instanceof DBusError && e.errorName === NO_SUCH_UNIT) return;
      throw e;
    }
    const what = `Cannot stop systemd unit ${JSON.stringify(name)}`;
    const result = await this.waitJob(String(reply.body[0]), what, opts);
    if (result !== "done") throw new Error(`${what}: its job ended "${result}"`);
  }

  /** Sets `properties` of unit `name` for this boot only (runtime). */
  async setUnitProperties(
    name: string,
    properties: UnitProperty[],
    opts: Abortable = {},
  ): Promise<void> {
    await this.manager("SetUnitProperties", "sba(sv)", [name, true, properties], opts);
  }

  /** Forgets the failed state of unit `name` so that systemd can unload it; a unit systemd
   * does not have is no error. */
  async resetFailedUnit(name: string, opts: Abortable = {}): Promise<void> {
    try {
      await this.manager("ResetFailedUnit", "s", [name], opts);
    } catch (e) {
      if (!(e instanceof DBusError && e.errorName === NO_SUCH_UNIT)) throw e;
    }
  }

  /** The object path of loaded unit `name`, or null if systemd does not have it. */
  async unitPath(name: string, opts: Abortable = {}): Promise<string | null> {
    try {
      return String((await this.manager("GetUnit", "s", [name], opts)).body[0]);
    } catch (e) {
      if (e instanceof DBusError && e.errorName === NO_SUCH_UNIT) return null;
      throw e;
    }
  }

  /** Property `property` of interface `iface` of the unit at `path`. */
  async unitProperty(
    path: string,
    iface: string,
    property: string,
    opts: Abortable = {},
  ): Promise<DBusValue> {
    const reply = await this.call(
      {
        path,
        interface: "org.freedesktop.DBus.Properties",
        member: "Get",
        signature: "ss",
        body: [iface, property],
      },
      opts,
    );
    const v = reply.body[0];
    if (!(v instanceof Variant))
      throw new Error(`systemd answered Get ${property} with ${reply.signature}`);
    return v.value;
  }

  /** Unit `name`'s ActiveState ("active", "failed", …), or null if systemd does not have it. */
  async activeState(name: string, opts: Abortable = {}): Promise<string | null> {
    const path = await this.unitPath(name, opts);
    if (path === null) return null;
    return String(
      await this.unitProperty(path, "org.freedesktop.systemd1.Unit", "ActiveState", opts),
    );
  }

  /** How many jobs are being waited for. */
  get waitingJobs(): number {
    return this.waiters.size;
  }

  /** Stops listening for signals; the connection is the caller's to close. */
  close(): void {
    this.stopListening();
  }
}
