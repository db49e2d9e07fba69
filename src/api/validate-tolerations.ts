// Value checks of spec.tolerations, with the API server's rules and messages
// (ValidateTolerations): a key is a label name; an empty key needs operator Exists; Equal takes a
// label value, Exists no value; tolerationSeconds only with effect NoExecute.
import { type FieldError, type FieldPath, invalid, notSupported } from "./field-error.ts";
import { isQualifiedName, isValidLabelValue } from "./names.ts";
import type { Toleration } from "./types.ts";

const EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

function validateOne(t: Toleration, p: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  const key = t.key ?? "";
  if (key !== "") errs.push(...isQualifiedName(key).map((m) => invalid(p.child("key"), key, m)));
  if (key === "" && t.operator !== "Exists") {
    errs.push(
      invalid(
        p.child("operator"),
        t.operator ?? "",
        'operator must be Exists when `key` is empty, which means "match all values and all keys"',
      ),
    );
  }
  if (t.tolerationSeconds !== undefined && t.effect !== "NoExecute") {
    errs.push(
      invalid(
        p.child("effect"),
        t.effect ?? "",
        "effect must be 'NoExecute' when `tolerationSeconds` is set",
      ),
    );
  }
  const op = t.operator ?? "";
  if (op === "" || op === "Equal") {
    const value = t.value ?? "";
    const bad = isValidLabelValue(value);
    if (bad.length > 0) errs.push(invalid(p.child("operator"), value, bad.join(";")));
  } else if (op === "Exists") {
    if ((t.value ?? "") !== "")
      errs.push(invalid(p.child("operator"), t, "value must be empty when `operator` is 'Exists'"));
  } else {
    errs.push(notSupported(p.child("operator"), op, ["Equal", "Exists"]));
  }
  if (t.effect !== undefined && t.effect !== "" && !EFFECTS.includes(t.effect))
    errs.push(notSupported(p.child("effect"), t.effect, EFFECTS));
  return errs;
}

export function validateTolerations(list: readonly Toleration[], path: FieldPath): FieldError[] {
  return list.flatMap((t, i) => validateOne(t, path.index(i)));
}
