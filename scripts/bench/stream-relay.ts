// A stream relayed between two hub replicas through NATS (src/hub/relay/), on loopback: a
// nats-server of our own (scripts/lib/nats.ts) and two connections in this one process, one per
// replica. Prints, against the targets of docs/hub-replicas.md:
//   - the round trip the relay adds: a small message (--bytes) echoed by an exec-like device,
//     through the relay and directly in the process (the same device's OpenStream called here),
//     alternating one of each per round over --rounds rounds (after 50 warm-up rounds); p50 and
//     p99 of each, and of the relayed minus the direct (target: ≤ 5 ms added);
//   - the throughput of one relayed stream: --mb MB written by the device in pieces of 64 KiB
//     (a port-forward's reads) until the requester has them all, with the default grants (target
//     ≥ 30 MB/s);
//   - what a bus message (publish→receive, one every 10 ms) waits during that transfer, with the
//     bus on the relay's connections (as a replica runs them) and on connections of their own.
// Needs nats-server (Debian's package), no root.
//   node_modules/.bin/bun scripts/bench/stream-relay.ts [--rounds 2000] [--bytes 64] [--mb 200]
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { createStreamRelay } from "../../src/hub/relay/index.ts";
import type { StreamOpen } from "../../src/protocol/index.ts";
import type { OpenStream, StreamOutput, StreamWork } from "../../src/streams/types.ts";
import { realClock } from "../../src/util/clock.ts";
import { createLogger } from "../../src/util/log.ts";
import { startNatsServer } from "../lib/nats.ts";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i > 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isInteger(v) || v <= 0) {
    console.error(`usage: stream-relay.ts [--rounds N] [--bytes N] [--mb N]; bad --${name}`);
    process.exit(2);
  }
  return v;
}
const ROUNDS = arg("rounds", 2000);
const BYTES = arg("bytes", 64);
const MB = arg("mb", 200);
const WARMUP = 50;

const quantile = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
};
const ms = (x: number) => `${x.toFixed(3)} ms`;

const target = {
  type: "stream.open",
  id: 1,
  namespace: "default",
  pod: "bench",
  window: 0,
} as const;
const execReq: StreamOpen = { ...target, kind: "exec", command: ["cat"], stdin: true };
const forwardReq: StreamOpen = { ...target, kind: "portforward", port: 80 };

/** exec: echoes input on stdout. portforward: writes MB megabytes, then ends. */
const device: OpenStream = async (req, out, signal) => {
  if (req.kind === "exec") return { input: (_c, d) => out.write(1, d) };
  void (async () => {
    const piece = new Uint8Array(64 * 1024).fill(7);
    for (let left = MB * 1e6; left > 0 && !signal.aborted; left -= piece.length)
      await out.write(0, left >= piece.length ? piece : piece.subarray(0, left));
    out.end({ exitCode: 0 });
  })();
  return {};
};

/** An output that resolves `next` on each echo. */
function echoOutput(): { out: StreamOutput; next: () => Promise<void> } {
  let wake: (() => void) | undefined;
  return {
    out: {
      write: async () => wake?.(),
      end: () => {},
    },
    next: () =>
      new Promise<void>((r) => {
        wake = r;
      }),
  };
}

async function roundTrip(work: StreamWork, next: () => Promise<void>, msg: Uint8Array) {
  const t0 = performance.now();
  const echoed = next();
  await work.input?.(0, msg);
  await echoed;
  return performance.now() - t0;
}

async function roundTrips(relayed: OpenStream) {
  const stop = new AbortController();
  const r = echoOutput();
  const d = echoOutput();
  const viaRelay = await relayed(execReq, r.out, stop.signal);
  const direct = await device(execReq, d.out, stop.signal);
  const msg = new Uint8Array(BYTES).fill(65);
  const relayMs: number[] = [];
  const directMs: number[] = [];
  for (let i = 0; i < WARMUP + ROUNDS; i++) {
    const a = await roundTrip(viaRelay, r.next, msg);
    const b = await roundTrip(direct, d.next, msg);
    if (i < WARMUP) continue;
    relayMs.push(a);
    directMs.push(b);
  }
  stop.abort();
  return { relayMs, directMs };
}

async function throughput(relayed: OpenStream): Promise<number> {
  let got = 0;
  const done = Promise.withResolvers<void>();
  const out: StreamOutput = {
    write: async (_c, data) => {
      got += data.length;
    },
    end: (r) => (r.error ? done.reject(new Error(r.error.message)) : done.resolve()),
  };
  const t0 = performance.now();
  await relayed(forwardReq, out, new AbortController().signal);
  await done.promise;
  const s = (performance.now() - t0) / 1000;
  if (got !== MB * 1e6) throw new Error(`received ${got} bytes of ${MB * 1e6}`);
  return got / 1e6 / s;
}

/** Publish→receive times (ms) of small messages from `from` to `to`, one every 10 ms, while a
 * relayed transfer runs (the holder's side sends it): what a bus message waits behind a stream
 * on the connection it shares, or not. */
async function busLatencyDuring(
  from: NatsConnection,
  to: NatsConnection,
  relayed: OpenStream,
): Promise<{ ms: number[]; mbs: number }> {
  const got: number[] = [];
  const sub = to.subscribe("bench.poke", {
    callback: (_e, m) => {
      got.push(performance.now() - Number(m.string()));
    },
  });
  await to.flush();
  let running = true;
  const poking = (async () => {
    while (running) {
      from.publish("bench.poke", String(performance.now()));
      await Bun.sleep(10);
    }
  })();
  const mbs = await throughput(relayed);
  running = false;
  await poking;
  await from.flush();
  await to.flush();
  sub.unsubscribe();
  return { ms: got, mbs };
}

async function main() {
  const nats = await startNatsServer();
  const log = createLogger({ level: "error" });
  const a = await connect({ servers: [nats.url], name: "hub-a" });
  const b = await connect({ servers: [nats.url], name: "hub-b" });
  try {
    const requester = createStreamRelay({ nc: a, clock: realClock, log });
    const holder = createStreamRelay({ nc: b, clock: realClock, log });
    holder.serve("bench-node", device);
    await b.flush();
    const relayed = requester.opener("bench-node");
    const { relayMs, directMs } = await roundTrips(relayed);
    const added = relayMs.map((x, i) => x - (directMs[i] ?? 0));
    console.log(`round trip of ${BYTES} bytes, ${ROUNDS} rounds:`);
    console.log(`  relayed: p50 ${ms(quantile(relayMs, 0.5))}  p99 ${ms(quantile(relayMs, 0.99))}`);
    console.log(
      `  direct:  p50 ${ms(quantile(directMs, 0.5))}  p99 ${ms(quantile(directMs, 0.99))}`,
    );
    const p50 = quantile(added, 0.5);
    const p99 = quantile(added, 0.99);
    console.log(
      `  added:   p50 ${ms(p50)}  p99 ${ms(p99)}  (target <= 5 ms: ${p99 <= 5 ? "yes" : "no"})`,
    );
    const mbs = await throughput(relayed);
    console.log(
      `one relayed stream, ${MB} MB: ${mbs.toFixed(1)} MB/s (target >= 30 MB/s: ${mbs >= 30 ? "yes" : "no"})`,
    );
    // The bus and the relay on one connection per replica (as the hub runs), or each its own.
    const a2 = await connect({ servers: [nats.url], name: "hub-a-bus" });
    const b2 = await connect({ servers: [nats.url], name: "hub-b-bus" });
    const shared = await busLatencyDuring(b, a, relayed);
    const own = await busLatencyDuring(b2, a2, relayed);
    await Promise.all([a2.close(), b2.close()]);
    for (const [what, r] of [
      ["on the relay's connections", shared],
      ["on connections of their own", own],
    ] as const)
      console.log(
        `bus message during a relayed transfer (${r.mbs.toFixed(1)} MB/s), ${what}: p50 ${ms(quantile(r.ms, 0.5))}  p99 ${ms(quantile(r.ms, 0.99))}  (${r.ms.length} messages)`,
      );
    const s = [requester.stats(), holder.stats()];
    console.log(
      `left open: ${s.map((x) => `${x.subscriptions} subscriptions, ${x.timers} timers`).join(" / ")}`,
    );
  } finally {
    await Promise.all([a.close(), b.close()]);
    await nats.stop();
  }
}

await main();
