// What operators write of a node, kept against a replica's older view of it
// (src/hub/pg/operator-fields.ts), and the stamp of the hub's labels (node-sessions.ts).
import { expect, test } from "bun:test";
import { labelStamp } from "../../../src/hub/node-sessions.ts";
import { withOperatorFields } from "../../../src/hub/pg/operator-fields.ts";
import type { NodeProgress } from "../../../src/hub/store.ts";

const mine: NodeProgress = {
  ...{ name: "cam-1", credentialHash: "c", hubLabels: { site: "a" }, hubLabelsAt: 10 },
  ...{ joinedAt: 1, ackedSeq: 4, connected: true, desiredGeneration: 2, ackedGeneration: 2 },
};
const row = (o: { revoked?: number; labelsAt?: number; labels?: Record<string, string> }) => ({
  ...(o.revoked !== undefined && { revokedAt: o.revoked }),
  ...(o.labelsAt !== undefined && { hubLabelsAt: o.labelsAt }),
  ...(o.labels !== undefined && { hubLabels: o.labels }),
});

test("a stored revoke is kept by a write without one; a write's own revoke stays", () => {
  expect(withOperatorFields(mine, row({ revoked: 99 })).revokedAt).toBe(99);
  expect(withOperatorFields({ ...mine, revokedAt: 50 }, row({ revoked: 99 })).revokedAt).toBe(50);
});

test("stored labels with a later stamp are kept; with an earlier or the same one, the write's go", () => {
  const later = withOperatorFields(mine, row({ labelsAt: 11, labels: { site: "b" } }));
  expect(later).toMatchObject({ hubLabels: { site: "b" }, hubLabelsAt: 11 });
  expect(later.ackedSeq).toBe(4);
  expect(withOperatorFields(mine, row({ labelsAt: 10, labels: { site: "b" } }))).toBe(mine);
  expect(withOperatorFields(mine, row({ labelsAt: 9, labels: { site: "b" } }))).toBe(mine);
  // Labels stored before they had a stamp do not win over a stamped write.
  expect(withOperatorFields(mine, row({ labels: { site: "b" } }))).toBe(mine);
});

test("a label stamp is the hub's time, or one above the stamp seen when the clock is behind", () => {
  expect(labelStamp({}, 1000)).toBe(1000);
  expect(labelStamp({ hubLabelsAt: 500 }, 1000)).toBe(1000);
  expect(labelStamp({ hubLabelsAt: 5000 }, 1000)).toBe(5001);
});
