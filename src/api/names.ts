// Name checks of k8s.io/apimachinery/pkg/util/validation, with the same messages. Each check
// returns the list of problems; an empty list means the value is valid.

const dns1123LabelFmt = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const dns1123SubdomainFmt = `${dns1123LabelFmt}(\\.${dns1123LabelFmt})*`;
const qualifiedNameFmt = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const labelValueFmt = `(${qualifiedNameFmt})?`;
const envVarNameFmt = "[-._a-zA-Z][-._a-zA-Z0-9]*";

const dns1123LabelRe = new RegExp(`^${dns1123LabelFmt}$`);
const dns1123SubdomainRe = new RegExp(`^${dns1123SubdomainFmt}$`);
const qualifiedNameRe = new RegExp(`^${qualifiedNameFmt}$`);
const labelValueRe = new RegExp(`^${labelValueFmt}$`);
const envVarNameRe = new RegExp(`^${envVarNameFmt}$`);

const DNS1123_LABEL_MAX = 63;
const DNS1123_SUBDOMAIN_MAX = 253;
const QUALIFIED_NAME_MAX = 63;
const LABEL_VALUE_MAX = 63;
const IANA_SVC_NAME_MAX = 15;

function maxLen(n: number): string {
  return `must be no more than ${n} characters`;
}

function regexError(msg: string, fmt: string, examples: string[]): string {
  const eg = examples.map((e) => `'${e}'`).join(",  or ");
  return `${msg} (e.g. ${eg}, regex used for validation is '${fmt}')`;
}

export function isDNS1123Label(value: string): string[] {
  const errs: string[] = [];
  if (value.length > DNS1123_LABEL_MAX) errs.push(maxLen(DNS1123_LABEL_MAX));
  if (!dns1123LabelRe.test(value)) {
    const msg =
      "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
    errs.push(regexError(msg, dns1123LabelFmt, ["my-name", "123-abc"]));
  }
  return errs;
}

export function isDNS1123Subdomain(value: string): string[] {
  const errs: string[] = [];
  if (value.length > DNS1123_SUBDOMAIN_MAX) errs.push(maxLen(DNS1123_SUBDOMAIN_MAX));
  if (!dns1123SubdomainRe.test(value)) {
    const msg =
      "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
    errs.push(regexError(msg, dns1123SubdomainFmt, ["example.com"]));
  }
  return errs;
}

/** A label or annotation key: an optional DNS subdomain prefix and "/", then a name. */
export function isQualifiedName(value: string): string[] {
  const parts = value.split("/");
  const errs: string[] = [];
  let name = value;
  if (parts.length === 2) {
    const prefix = parts[0] ?? "";
    name = parts[1] ?? "";
    if (prefix.length === 0) errs.push("prefix part must be non-empty");
    else errs.push(...isDNS1123Subdomain(prefix).map((m) => `prefix part ${m}`));
  } else if (parts.length > 2) {
    const msg =
      "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
    return [regexError(msg, qualifiedNameFmt, ["MyName", "my.name", "123-abc"])];
  }
  if (name.length === 0) return [...errs, "name part must be non-empty"];
  if (name.length > QUALIFIED_NAME_MAX) errs.push(`name part ${maxLen(QUALIFIED_NAME_MAX)}`);
  if (!qualifiedNameRe.test(name)) {
    const msg =
      "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
    errs.push(regexError(msg, qualifiedNameFmt, ["MyName", "my.name", "123-abc"]));
  }
  return errs;
}

export function isValidLabelValue(value: string): string[] {
  const errs: string[] = [];
  if (value.length > LABEL_VALUE_MAX) errs.push(maxLen(LABEL_VALUE_MAX));
  if (!labelValueRe.test(value)) {
    const msg =
      "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
    errs.push(regexError(msg, labelValueFmt, ["MyValue", "my_value", "12345"]));
  }
  return errs;
}

/** An IANA service name, as used for port names: at most 15 of [a-z0-9-] with a letter. */
export function isValidPortName(value: string): string[] {
  const errs: string[] = [];
  if (value.length > IANA_SVC_NAME_MAX) errs.push(maxLen(IANA_SVC_NAME_MAX));
  if (!/^[-a-z0-9]+$/.test(value)) {
    errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
  }
  if (value.includes("--")) errs.push("must not contain consecutive hyphens");
  if (!/[a-z]/.test(value)) errs.push("must contain at least one letter (a-z)");
  if (value.startsWith("-") || value.endsWith("-")) {
    errs.push("must not begin or end with a hyphen");
  }
  return errs;
}

export function isEnvVarName(value: string): string[] {
  if (envVarNameRe.test(value)) return [];
  const msg =
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit";
  return [regexError(msg, envVarNameFmt, ["my.env-name", "MY_ENV.NAME", "MyEnvName1"])];
}

const configMapKeyFmt = "[-._a-zA-Z0-9]+";
const configMapKeyRe = new RegExp(`^${configMapKeyFmt}$`);

/** A key of a ConfigMap or Secret: a file name that is never "." or ".." and never hidden
 * behind "..". */
export function isConfigMapKey(value: string): string[] {
  const errs: string[] = [];
  if (value.length > DNS1123_SUBDOMAIN_MAX) errs.push(maxLen(DNS1123_SUBDOMAIN_MAX));
  if (!configMapKeyRe.test(value)) {
    const msg = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
    errs.push(regexError(msg, configMapKeyFmt, ["key.name", "KEY_NAME", "key-name"]));
  }
  if (value === ".") errs.push("must not be '.'");
  else if (value === "..") errs.push("must not be '..'");
  else if (value.startsWith("..")) errs.push("must not start with '..'");
  return errs;
}

/** True for a port number in 1..65535. */
export function isValidPortNum(port: number): boolean {
  return Number.isInteger(port) && port >= 1 && port <= 65535;
}

export const PORT_RANGE_MSG = "must be between 1 and 65535, inclusive";

/** True for a dotted IPv4 address or a (possibly compressed) IPv6 address. */
export function isValidIP(value: string): boolean {
  const v4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
  if (v4.test(value)) return true;
  if (!value.includes(":") || !/^[0-9a-fA-F:.]+$/.test(value)) return false;
  try {
    return new URL(`http://[${value}]/`).hostname.length > 2;
  } catch {
    return false;
  }
}
