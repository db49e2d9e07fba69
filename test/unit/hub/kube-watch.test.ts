// Watches of the hub's Kubernetes API on the injected clock: the list comparison of a resource
// without a change log, and ?timeoutSeconds=.
import { describe, expect, test } from "bun:test";
import { ChangeLog } from "../../../src/hub/kube/changes.ts";
import { listResponse, type ReadContext } from "../../../src/hub/kube/reads.ts";
import type { KubeObject, KubeResource } from "../../../src/hub/kube/resources.ts";
import { FakeClock } from "../../../src/util/clock.ts";

const object = (name: string, version: number): KubeObject =>
  ({
    kind: "ConfigMap",
    metadata: { name, namespace: "default", resourceVersion: String(version) },
  }) as KubeObject;

function polled(objects: KubeObject[]): KubeResource {
  return {
    name: "configmaps",
    singular: "configmap",
    kind: "ConfigMap",
    group: "",
    namespaced: true,
    verbs: ["list", "watch"],
    list: () => objects,
    get: () => undefined,
    fields: {},
    table: { columns: [], cells: () => [] },
    changes: "poll",
  };
}

function watch(clock: FakeClock, r: KubeResource, query: string) {
  const ctx: ReadContext = { changes: new ChangeLog(clock.now()), clock, pollMs: 500 };
  const q = new URLSearchParams(`watch=true&${query}`);
  const res = listResponse(ctx, r, undefined, new Request("http://hub/api/v1/configmaps"), q);
  const reader = (res.body as ReadableStream<Uint8Array | string>).getReader();
  const decoder = new TextDecoder();
  const read = async (): Promise<string | undefined> => {
    const { value, done } = await reader.read();
    if (done) return undefined;
    return typeof value === "string" ? value : decoder.decode(value);
  };
  const first = read();
  let started = false;
  /** The next event (the first blank line read apart, by `first`). */
  const next = async (): Promise<string | undefined> => {
    if (!started) {
      started = true;
      expect(await first).toBe("\n");
    }
    return read();
  };
  return next;
}

describe("a watch of a resource without a change log", () => {
  test("sends a blank line at once, so that its headers go out before any event", async () => {
    const clock = new FakeClock();
    const ctx: ReadContext = { changes: new ChangeLog(clock.now()), clock, pollMs: 500 };
    const req = new Request("http://hub/api/v1/configmaps");
    const res = listResponse(ctx, polled([]), undefined, req, new URLSearchParams("watch=true"));
    const reader = (res.body as ReadableStream<string>).getReader();
    expect(await reader.read()).toEqual({ value: "\n", done: false });
    await reader.cancel();
  });

  test("compares the list every pollMs of the injected clock", async () => {
    const clock = new FakeClock();
    const objects = [object("a", 1)];
    const next = watch(clock, polled(objects), "");
    expect(JSON.parse((await next()) as string)).toMatchObject({
      type: "ADDED",
      object: { metadata: { name: "a" } },
    });
    objects.push(object("b", 2));
    clock.step(499);
    objects[0] = object("a", 3);
    clock.step(1);
    const events = [await next(), await next()].map((t) => JSON.parse(t as string));
    expect(events.map((e) => [e.type, e.object.metadata.name]).sort()).toEqual([
      ["ADDED", "b"],
      ["MODIFIED", "a"],
    ]);
    objects.splice(0, 1);
    clock.step(500);
    expect(JSON.parse((await next()) as string)).toMatchObject({
      type: "DELETED",
      object: { metadata: { name: "a" } },
    });
  });

  test("ends after ?timeoutSeconds= of the injected clock, and stops polling", async () => {
    const clock = new FakeClock();
    const next = watch(clock, polled([]), "timeoutSeconds=2");
    expect(clock.pending).toBe(2);
    clock.step(2000);
    expect(await next()).toBeUndefined();
    expect(clock.pending).toBe(0);
  });
});
