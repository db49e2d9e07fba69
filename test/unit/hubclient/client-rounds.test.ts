// The hub client given several hub URLs (the replicas of one hub): rounds of every URL once in a
// fresh random order, the next URL at once after a failed connect, the backoff only between rounds.
import { afterEach, describe, expect, test } from "bun:test";
import {
  createHubClient,
  type HubClientDeps,
  JoinError,
} from "../../../src/agent/hubclient/index.ts";
import { shuffled } from "../../../src/agent/hubclient/rounds.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { createLogger } from "../../../src/util/log.ts";
import { prng } from "../../lib/prng.ts";
import { fakeDial, node, outboxAt, tempDir } from "./fixtures.ts";

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
});

const URLS = ["https://hub-a:7443", "https://hub-b:7443", "wss://hub-c:7443"];
const connectOf = (url: string) => `${url.replace(/^https:/, "wss:")}/api/v1/agent/connect`;

function setup(overrides: Partial<HubClientDeps> = {}) {
  const t = tempDir();
  cleanups.push(t.cleanup);
  const clock = new FakeClock();
  const { dial, conns } = fakeDial();
  const logs: Record<string, unknown>[] = [];
  const dialled: { url: string; at: number }[] = [];
  const client = createHubClient({
    clock,
    logger: createLogger({ format: "json", write: (l) => logs.push(JSON.parse(l)) }),
    random: prng(7),
    hubUrls: URLS,
    nodeName: "cam-1",
    agentVersion: "0.1.0",
    outbox: outboxAt(t.dir),
    credential: async () => "flc_x",
    dial: (url, headers, events) => {
      dialled.push({ url, at: clock.now() });
      return dial(url, headers, events);
    },
    node,
    pod: () => undefined,
    pods: () => [],
    podsSynced: () => true,
    nodeEvent: () => {},
    backoffBaseMs: 1000,
    backoffMaxMs: 8000,
    ...overrides,
  });
  /** The wait the client chose after its last round (its log line). */
  const lastRetry = () => {
    const line = logs.findLast((l) => l.msg === "disconnected from the hub; pods keep running");
    return line?.retryInMs as number;
  };
  return { clock, client, conns, dialled, logs, lastRetry };
}

const flush = async () => {
  for (let i = 0; i < 10; i++) await Bun.sleep(0);
};

describe("shuffled()", () => {
  test("gives every order of three URLs about equally often (seeded)", () => {
    const random = prng(42);
    const counts = new Map<string, number>();
    for (let i = 0; i < 6000; i++) {
      const order = shuffled(URLS, random);
      expect([...order].sort()).toEqual([...URLS].sort());
      const key = order.join(" ");
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    expect(counts.size).toBe(6);
    for (const n of counts.values()) {
      expect(n).toBeGreaterThan(850);
      expect(n).toBeLessThan(1150);
    }
  });

  test("is Fisher–Yates over the random draws, and leaves its input alone", () => {
    const input = ["a", "b", "c"];
    expect(shuffled(input, () => 0)).toEqual(["b", "c", "a"]);
    expect(shuffled(input, () => 0.9999)).toEqual(["a", "b", "c"]);
    expect(input).toEqual(["a", "b", "c"]);
    expect(shuffled(["only"], () => 0)).toEqual(["only"]);
  });
});

describe("createHubClient() with several hub URLs", () => {
  test("each URL once per round, the next at once after a failed connect, the backoff between rounds", async () => {
    const { client, clock, conns, dialled, lastRetry } = setup();
    const ac = new AbortController();
    const running = client.run(ac.signal);
    const rounds: string[][] = [];
    for (let round = 0; round < 4; round++) {
      const start = clock.now();
      const seen: string[] = [];
      for (let i = 0; i < URLS.length; i++) {
        await flush();
        expect(dialled).toHaveLength(round * URLS.length + i + 1);
        const d = dialled.at(-1);
        expect(d?.at).toBe(start);
        seen.push(d?.url ?? "");
        conns.at(-1)?.events.onClose(1006, "connection refused");
      }
      await flush();
      expect(dialled).toHaveLength((round + 1) * URLS.length);
      expect([...seen].sort()).toEqual(URLS.map(connectOf).sort());
      rounds.push(seen);
      const wait = lastRetry();
      expect(wait).toBeGreaterThan(0);
      // The attempt count grows per round, not per URL tried.
      expect(wait).toBeLessThanOrEqual(1000 * 2 ** round);
      clock.step(wait - 1);
      await flush();
      expect(dialled).toHaveLength((round + 1) * URLS.length);
      clock.step(1);
    }
    // A fresh order each round (with this seed, not every round starts at the same URL).
    expect(new Set(rounds.map((r) => r.join(" "))).size).toBeGreaterThan(1);
    ac.abort();
    await running;
  });

  test("a welcomed connection ends its round: when it drops, the backoff, then a new round", async () => {
    const { client, clock, conns, dialled, lastRetry } = setup();
    const ac = new AbortController();
    const running = client.run(ac.signal);
    await flush();
    const first = dialled[0]?.url;
    conns[0]?.open();
    conns[0]?.welcome(0);
    expect(client.connected).toBe(true);
    expect(connectOf(client.hubUrl)).toBe(first ?? "");
    conns[0]?.events.onClose(1006, "the replica died");
    await flush();
    expect(dialled).toHaveLength(1);
    clock.step(lastRetry());
    await flush();
    expect(dialled).toHaveLength(2);
    ac.abort();
    await running;
  });

  test("joins at the URL it tries: a failed join moves on at once, a refused one ends the round", async () => {
    const asked: string[] = [];
    const { client, clock, dialled, lastRetry } = setup({
      credential: async (url) => {
        asked.push(url);
        if (asked.length === 1) throw new JoinError(`cannot reach the hub at ${url}`, false);
        throw new JoinError('the hub refused to join node "cam-1": token expired', true);
      },
    });
    const ac = new AbortController();
    const running = client.run(ac.signal);
    await flush();
    expect(asked).toHaveLength(2);
    expect(new Set(asked).size).toBe(2);
    expect(URLS).toContain(asked[0] ?? "");
    expect(URLS).toContain(asked[1] ?? "");
    expect(dialled).toEqual([]);
    expect(lastRetry()).toBe(8000);
    clock.step(7999);
    await flush();
    expect(asked).toHaveLength(2);
    clock.step(1);
    await flush();
    expect(asked).toHaveLength(3);
    ac.abort();
    await running;
  });
});
