import { describe, expect, test } from "bun:test";
import { createCriClient, parseCriEndpoint } from "../../../src/cri/index.ts";

describe("parseCriEndpoint()", () => {
  test("accepts unix:// with an absolute socket path", () => {
    expect(parseCriEndpoint("unix:///run/containerd/containerd.sock")).toEqual({
      endpoint: "unix:///run/containerd/containerd.sock",
      socketPath: "/run/containerd/containerd.sock",
    });
  });

  test.each([
    ["/run/containerd/containerd.sock"],
    ["unix:/run/containerd/containerd.sock"],
    ["unix://run/containerd.sock"],
    ["unix://"],
    ["unix:///run/containerd/"],
    ["tcp://127.0.0.1:1234"],
    ["npipe:////./pipe/containerd"],
    ["unix:///run/x.sock?query"],
    [""],
  ])("refuses %p and names the value in the error", (endpoint) => {
    expect(() => parseCriEndpoint(endpoint)).toThrow(
      `Invalid CRI endpoint ${JSON.stringify(endpoint)}`,
    );
  });

  test("createCriClient() refuses a non-unix endpoint before opening anything", () => {
    expect(() => createCriClient({ endpoint: "tcp://127.0.0.1:1" })).toThrow(
      /Invalid CRI endpoint/,
    );
  });
});
