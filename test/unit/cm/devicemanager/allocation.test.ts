import { describe, expect, test } from "bun:test";
import {
  type ContainerRequest,
  chooseDevices,
  type PreferredRequest,
} from "../../../../src/agent/cm/devicemanager/allocation.ts";

const ids = (n: number) => Array.from({ length: n }, (_, i) => `d${i}`);
const init = (name: string, count: number): ContainerRequest => ({ name, kind: "init", count });
const side = (name: string, count: number): ContainerRequest => ({ name, kind: "sidecar", count });
const app = (name: string, count: number): ContainerRequest => ({ name, kind: "app", count });

async function choose(
  healthy: string[],
  containers: ContainerRequest[],
  heldByOthers: string[] = [],
): Promise<Record<string, string[]> | string> {
  const c = await chooseDevices({ healthy, heldByOthers: new Set(heldByOthers), containers });
  return c.ok
    ? Object.fromEntries(c.ids)
    : `${c.container}: requested ${c.requested}, available ${c.available}`;
}

interface Row {
  what: string;
  healthy: string[];
  held: string[];
  containers: ContainerRequest[];
  /** Ids per container, or the shortage. */
  want: Record<string, string[]> | string;
}

describe("chooseDevices() without a preference", () => {
  test.each<Row>([
    {
      what: "takes the lowest free ids",
      healthy: ["d2", "d0", "d1"],
      held: [],
      containers: [app("a", 2)],
      want: { a: ["d0", "d1"] },
    },
    {
      what: "skips ids other pods hold",
      healthy: ids(4),
      held: ["d0", "d2"],
      containers: [app("a", 2)],
      want: { a: ["d1", "d3"] },
    },
    {
      what: "app containers reuse a regular init container's devices first",
      healthy: ids(4),
      held: [],
      containers: [init("i", 2), app("a", 1), app("b", 2)],
      want: { i: ["d0", "d1"], a: ["d0"], b: ["d1", "d2"] },
    },
    {
      what: "a later init container reuses an earlier one's devices",
      healthy: ids(4),
      held: [],
      containers: [init("i1", 1), init("i2", 2), app("a", 2)],
      want: { i1: ["d0"], i2: ["d0", "d1"], a: ["d0", "d1"] },
    },
    {
      what: "a sidecar takes reused devices for good",
      healthy: ids(4),
      held: [],
      containers: [init("i", 2), side("s", 1), app("a", 2)],
      want: { i: ["d0", "d1"], s: ["d0"], a: ["d1", "d2"] },
    },
    {
      what: "a sidecar before a regular init container keeps its device from it",
      healthy: ids(4),
      held: [],
      containers: [side("s", 1), init("i", 2), app("a", 1)],
      want: { s: ["d0"], i: ["d1", "d2"], a: ["d1"] },
    },
    {
      what: "fails naming the container, what it lacks beyond the reuse pool, and what is free",
      healthy: ids(3),
      held: ["d2"],
      containers: [init("i", 1), app("a", 3)],
      want: "a: requested 2, available 1",
    },
  ])("$what", async ({ healthy, held, containers, want }) => {
    expect(await choose(healthy, containers, held)).toEqual(want);
  });

  test("a container holding devices already keeps them and gets nothing new", async () => {
    const c = await chooseDevices({
      healthy: ids(3),
      heldByOthers: new Set(),
      containers: [{ ...init("i", 2), held: ["d1", "d2"] }, app("a", 1), app("b", 1)],
    });
    expect(c.ok && Object.fromEntries(c.ids)).toEqual({ a: ["d1"], b: ["d2"] });
  });

  test("the same input always gives the same devices", async () => {
    const input = [init("i", 3), app("a", 2), app("b", 2)];
    const first = await choose(ids(12), input, ["d3"]);
    for (let i = 0; i < 5; i++)
      expect(await choose([...ids(12)].reverse(), input, ["d3"])).toEqual(first);
  });
});

describe("chooseDevices() with the plugin's preference", () => {
  /** A preference that answers with `answer` and records what it was asked. */
  const ask = (answer: (r: PreferredRequest) => string[]) => {
    const asked: PreferredRequest[] = [];
    const prefer = async (_: string, r: PreferredRequest) => {
      asked.push(r);
      return answer(r);
    };
    return { asked, prefer };
  };

  test("uses a valid answer; asks with the free ids, the size, and nothing to include", async () => {
    const { asked, prefer } = ask(() => ["d3", "d1"]);
    const c = await chooseDevices(
      { healthy: ids(4), heldByOthers: new Set(["d2"]), containers: [app("a", 2)] },
      prefer,
    );
    expect(c.ok && Object.fromEntries(c.ids)).toEqual({ a: ["d3", "d1"] });
    expect(c.ok && c.rejected).toEqual([]);
    expect(asked).toEqual([{ available: ["d0", "d1", "d3"], mustInclude: [], size: 2 }]);
  });

  test("asks an app container to include the reuse pool when the pool is too small", async () => {
    const { asked, prefer } = ask((r) => [
      ...r.mustInclude,
      ...r.available.filter((id) => !r.mustInclude.includes(id)).slice(-1),
    ]);
    const c = await chooseDevices(
      { healthy: ids(4), heldByOthers: new Set(), containers: [init("i", 1), app("a", 2)] },
      prefer,
    );
    expect(asked).toEqual([
      { available: ["d0", "d1", "d2", "d3"], mustInclude: [], size: 1 },
      { available: ["d0", "d1", "d2", "d3"], mustInclude: ["d3"], size: 2 },
    ]);
    expect(c.ok && Object.fromEntries(c.ids)).toEqual({ i: ["d3"], a: ["d3", "d2"] });
  });

  test("does not ask when the reuse pool covers the container", async () => {
    const { asked, prefer } = ask((r) => r.available.slice(0, r.size));
    await chooseDevices(
      { healthy: ids(4), heldByOthers: new Set(), containers: [init("i", 2), app("a", 1)] },
      prefer,
    );
    expect(asked).toHaveLength(1);
  });

  test.each<{ what: string; answer: string[]; problem: string }>([
    { what: "too few devices", answer: ["d3"], problem: "it has 1 devices where 2 were asked" },
    {
      what: "too many devices",
      answer: ["d0", "d1", "d3"],
      problem: "it has 3 devices where 2 were asked",
    },
    { what: "a device twice", answer: ["d3", "d3"], problem: "it names a device twice" },
    {
      what: "a device another pod holds",
      answer: ["d2", "d3"],
      problem: 'device "d2" is not available',
    },
    {
      what: "a device that does not exist",
      answer: ["d9", "d3"],
      problem: 'device "d9" is not available',
    },
  ])("sets aside an answer with $what for its own choice", async ({ answer, problem }) => {
    const c = await chooseDevices(
      { healthy: ids(4), heldByOthers: new Set(["d2"]), containers: [app("a", 2)] },
      async () => answer,
    );
    expect(c.ok && Object.fromEntries(c.ids)).toEqual({ a: ["d0", "d1"] });
    expect(c.ok && c.rejected).toEqual([{ container: "a", answer, problem }]);
  });

  test("sets aside an answer that leaves out a device of the reuse pool", async () => {
    const c = await chooseDevices(
      { healthy: ids(4), heldByOthers: new Set(), containers: [init("i", 1), app("a", 2)] },
      async (name) => (name === "i" ? ["d2"] : ["d0", "d1"]),
    );
    expect(c.ok && Object.fromEntries(c.ids)).toEqual({ i: ["d2"], a: ["d2", "d0"] });
    expect(c.ok && c.rejected.map((r) => r.problem)).toEqual([
      'it leaves out device "d2", which must be included',
    ]);
  });

  test("a failed preference call fails the choice", async () => {
    const choice = chooseDevices(
      { healthy: ids(2), heldByOthers: new Set(), containers: [app("a", 1)] },
      async () => {
        throw new Error("plugin gone");
      },
    );
    await expect(choice).rejects.toThrow("plugin gone");
  });
});
