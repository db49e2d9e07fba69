// The agent config fields of the device manager (docs/devices.md): the device plugin folder (the
// kubelet's path by default), how long pods wait for plugins and for their calls, and the host
// device groups served by the built-in plugin.
import { z } from "zod";
import { isExtendedResourceName } from "../../api/extended-resources.ts";
import { hostDevicePatternProblem } from "../../util/device-glob.ts";
import { duration, integerFrom } from "./schema-parts.ts";

/** A group of host devices, served as one extended resource. */
export interface HostDeviceGroupConfig {
  /** The extended resource pods ask for ("fleetlet.io/serial"). */
  name: string;
  /** Absolute path patterns (wildcards *, ? and [...], one folder level each). */
  paths: string[];
  /** Pods that may share one device node at once (1: each node to one pod). */
  podsPerDevice: number;
}

/** The fields of a hostDevices entry, for "did you mean" hints. */
export const hostDeviceGroupFields = ["name", "paths", "podsPerDevice"] as const;

/** A string field that must be given: `what` says what it holds. */
const requiredString = (what: string) =>
  z.string({
    error: (issue) => (issue.input === undefined ? `is required: ${what}` : "must be a string"),
  });

const resourceName = requiredString(
  'the extended resource pods ask for, e.g. "fleetlet.io/serial"',
).refine(isExtendedResourceName, {
  error:
    'is not an extended resource name: it must be domain-prefixed and outside kubernetes.io, e.g. "fleetlet.io/serial"',
});

const pattern = z.string({ error: "must be a string" }).superRefine((v, ctx) => {
  const problem = hostDevicePatternProblem(v);
  if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
});

const hostDeviceGroup = z.strictObject(
  {
    name: resourceName,
    paths: z
      .array(pattern, {
        error: (issue) =>
          issue.input === undefined
            ? 'is required: the device paths, e.g. ["/dev/ttyUSB*"]'
            : 'must be a list of absolute path patterns, e.g. ["/dev/ttyUSB*"]',
      })
      .min(1, { error: "must list at least one path pattern" }),
    podsPerDevice: integerFrom(1, "must be at least 1").optional(),
  },
  { error: `must be a mapping with ${hostDeviceGroupFields.join(", ")}` },
);

const hostDeviceGroups = z
  .array(hostDeviceGroup, { error: "must be a list of device groups (name, paths, podsPerDevice)" })
  .superRefine((groups, ctx) => {
    const seen = new Set<string>();
    for (const [i, group] of groups.entries()) {
      if (seen.has(group.name))
        ctx.addIssue({
          code: "custom",
          path: [i, "name"],
          message: "is the name of an earlier group: each group serves a resource of its own",
        });
      seen.add(group.name);
    }
  });

export const deviceConfigFields = {
  devicePluginPath: z
    .string({ error: "must be a string" })
    .min(1, { error: "must not be empty" })
    .optional(),
  devicePluginWaitTimeout: duration.optional(),
  devicePluginCallTimeout: duration.optional(),
  hostDevices: hostDeviceGroups.optional(),
};

/** Flags of these fields (without "--") → field. */
export const deviceFlags: [string, string][] = [
  ["device-plugin-path", "devicePluginPath"],
  ["device-plugin-wait-timeout", "devicePluginWaitTimeout"],
  ["device-plugin-call-timeout", "devicePluginCallTimeout"],
];
