import { describe, expect, test } from "bun:test";
import { createWorkQueue } from "../../../src/agent/syncloop/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";

describe("work queue", () => {
  test("takeDue() returns the pods whose time has come, once", () => {
    const clock = new FakeClock();
    const queue = createWorkQueue(clock);
    queue.enqueue("a", 1000);
    queue.enqueue("b", 2000);
    expect(queue.takeDue()).toEqual([]);
    clock.step(1000);
    expect(queue.takeDue()).toEqual(["a"]);
    expect(queue.takeDue()).toEqual([]);
    clock.step(1000);
    expect(queue.takeDue()).toEqual(["b"]);
  });

  test("a later enqueue replaces an earlier one, and remove() forgets the pod", () => {
    const clock = new FakeClock();
    const queue = createWorkQueue(clock);
    queue.enqueue("a", 0);
    queue.enqueue("a", 5000);
    queue.enqueue("b", 0);
    queue.remove("b");
    expect(queue.takeDue()).toEqual([]);
    clock.step(5000);
    expect(queue.takeDue()).toEqual(["a"]);
  });
});
