// The agent config fields of the container manager: cgroups, reservations, pod pids limit and the CPU manager. Names and meanings as KubeletConfiguration's.
import { z } from "zod";
import { tryParseQuantity } from "../../api/index.ts";
import { flagPairs } from "./schema-parts.ts";

const RESERVABLE = ["cpu", "memory", "ephemeral-storage", "pid"];

const quantityText = z
  .union([z.string(), z.number()], { error: "must be a quantity" })
  .transform((v) => String(v))
  .refine(
    (v) => {
      const q = tryParseQuantity(v);
      return q !== undefined && q.num >= 0n;
    },
    { error: 'is not a non-negative quantity (e.g. "500m", "1Gi")' },
  );

const reservation = z
  .record(z.string(), quantityText, { error: "must be a map of resource to quantity" })
  .superRefine((m, ctx) => {
    for (const k of Object.keys(m)) {
      if (!RESERVABLE.includes(k))
        ctx.addIssue({
          code: "custom",
          path: [k],
          message: `is not one of ${RESERVABLE.join(", ")}`,
        });
    }
  });

const cpuList = z
  .string({ error: 'must be a CPU list such as "0" or "0-1,3"' })
  .regex(/^$|^\d+(-\d+)?(,\d+(-\d+)?)*$/, { error: 'is not a CPU list such as "0" or "0-1,3"' });

export const resourceConfigFields = {
  cgroupRoot: z
    .string({ error: "must be a string" })
    .regex(/^\/[^.]*$/, { error: 'must be an absolute cgroup path such as "/"' })
    .optional(),
  cgroupsPerQOS: z.boolean({ error: "must be true or false" }).optional(),
  cgroupDriver: z
    .enum(["cgroupfs", "systemd"], { error: 'must be "cgroupfs" or "systemd"' })
    .optional(),
  systemReserved: reservation.optional(),
  kubeReserved: reservation.optional(),
  podPidsLimit: z
    .number({ error: "must be an integer" })
    .int({ error: "must be an integer" })
    .min(-1, { error: "must be -1 (no limit) or more" })
    .optional(),
  cpuManagerPolicy: z.enum(["none", "static"], { error: 'must be "none" or "static"' }).optional(),
  reservedSystemCPUs: cpuList.optional(),
  cpuManagerStateFile: z
    .string({ error: "must be a string" })
    .min(1, { error: "must not be empty" })
    .optional(),
};

/** Flags of these fields: name (without "--") → field. */
export const resourceFlags: [string, string][] = [
  ["cgroup-root", "cgroupRoot"],
  ["cgroups-per-qos", "cgroupsPerQOS"],
  ["cgroup-driver", "cgroupDriver"],
  ["system-reserved", "systemReserved"],
  ["kube-reserved", "kubeReserved"],
  ["pod-max-pids", "podPidsLimit"],
  ["cpu-manager-policy", "cpuManagerPolicy"],
  ["reserved-cpus", "reservedSystemCPUs"],
  ["cpu-manager-state-file", "cpuManagerStateFile"],
];

/** Turns a flag's text into the field's value: "cpu=1,memory=1Gi" maps. */
export function resourceFlagValue(field: string, value: string): unknown {
  if (field === "podPidsLimit" && /^-?\d+$/.test(value)) return Number(value);
  if (field === "cgroupsPerQOS") return value === "true" ? true : value === "false" ? false : value;
  return field.endsWith("Reserved") ? flagPairs(value, "=") : value;
}
