// Kubernetes core/v1 shapes of what configures a pod from outside its spec: volumes (local
// ones: emptyDir, hostPath, configMap, secret, downwardAPI, projected), environment sources, and
// the ConfigMap and Secret objects they read. Field names and optionality follow the upstream
// JSON; `name` of a reference is optional there (omitempty) and required by validation.

import type { ObjectMeta } from "./types.ts";

type StorageMedium = "" | "Memory";
type HostPathType =
  | ""
  | "DirectoryOrCreate"
  | "Directory"
  | "FileOrCreate"
  | "File"
  | "Socket"
  | "CharDevice"
  | "BlockDevice";

/** A reference to an object of the pod's namespace by name. */
export interface LocalObjectReference {
  name?: string;
}

// ---- Downward API selectors ----

export interface ObjectFieldSelector {
  apiVersion?: string;
  fieldPath: string;
}

/** A container resource ("limits.memory", "requests.cpu", ...), divided by `divisor`. */
export interface ResourceFieldSelector {
  /** Required in volumes; in env, defaults to the container itself. */
  containerName?: string;
  resource: string;
  /** A quantity ("1Mi", "1m"); absent: 1. */
  divisor?: string;
}

// ---- Environment ----

interface ConfigMapKeySelector {
  name?: string;
  key: string;
  /** The variable is left out when the ConfigMap or its key does not exist. */
  optional?: boolean;
}

interface SecretKeySelector {
  name?: string;
  key: string;
  optional?: boolean;
}

/** Where an environment variable's value comes from; exactly one field is set. */
export interface EnvVarSource {
  fieldRef?: ObjectFieldSelector;
  resourceFieldRef?: ResourceFieldSelector;
  configMapKeyRef?: ConfigMapKeySelector;
  secretKeyRef?: SecretKeySelector;
}

interface ConfigMapEnvSource {
  name?: string;
  optional?: boolean;
}

interface SecretEnvSource {
  name?: string;
  optional?: boolean;
}

/** Every key of a ConfigMap or Secret as a variable, each name prefixed with `prefix`. */
export interface EnvFromSource {
  prefix?: string;
  configMapRef?: ConfigMapEnvSource;
  secretRef?: SecretEnvSource;
}

// ---- Volumes ----

interface EmptyDirVolumeSource {
  medium?: StorageMedium;
  sizeLimit?: string;
}

interface HostPathVolumeSource {
  path: string;
  type?: HostPathType;
}

/** One key of a ConfigMap or Secret written to a relative path, with an optional mode. */
export interface KeyToPath {
  key: string;
  path: string;
  mode?: number;
}

interface ConfigMapVolumeSource {
  name?: string;
  /** Only these keys, at these paths; absent: every key at its own name. */
  items?: KeyToPath[];
  /** Mode of the files (default 0644). */
  defaultMode?: number;
  optional?: boolean;
}

interface SecretVolumeSource {
  secretName?: string;
  items?: KeyToPath[];
  defaultMode?: number;
  optional?: boolean;
}

/** One file of a downwardAPI volume; exactly one of fieldRef and resourceFieldRef is set. */
export interface DownwardAPIVolumeFile {
  path: string;
  fieldRef?: ObjectFieldSelector;
  resourceFieldRef?: ResourceFieldSelector;
  mode?: number;
}

interface DownwardAPIVolumeSource {
  items?: DownwardAPIVolumeFile[];
  defaultMode?: number;
}

interface ConfigMapProjection {
  name?: string;
  items?: KeyToPath[];
  optional?: boolean;
}

interface SecretProjection {
  name?: string;
  items?: KeyToPath[];
  optional?: boolean;
}

interface DownwardAPIProjection {
  items?: DownwardAPIVolumeFile[];
}

interface ServiceAccountTokenProjection {
  audience?: string;
  expirationSeconds?: number;
  path: string;
}

/** One source of a projected volume; exactly one field is set. Service account tokens, trust
 * bundles and pod certificates are decoded so that validation can refuse them by name. */
interface VolumeProjection {
  configMap?: ConfigMapProjection;
  secret?: SecretProjection;
  downwardAPI?: DownwardAPIProjection;
  serviceAccountToken?: ServiceAccountTokenProjection;
  clusterTrustBundle?: Record<string, unknown>;
  podCertificate?: Record<string, unknown>;
}

export interface ProjectedVolumeSource {
  sources?: VolumeProjection[];
  defaultMode?: number;
}

/** A volume; exactly one source is set. */
export interface Volume {
  name: string;
  emptyDir?: EmptyDirVolumeSource;
  hostPath?: HostPathVolumeSource;
  configMap?: ConfigMapVolumeSource;
  secret?: SecretVolumeSource;
  downwardAPI?: DownwardAPIVolumeSource;
  projected?: ProjectedVolumeSource;
}

// ---- ConfigMap and Secret ----

export interface ConfigMap {
  apiVersion: "v1";
  kind: "ConfigMap";
  metadata: ObjectMeta;
  /** UTF-8 values by key. */
  data?: Record<string, string>;
  /** base64 values by key (no key also in `data`). */
  binaryData?: Record<string, string>;
  /** When true, data and binaryData may not change (delete and re-create instead). */
  immutable?: boolean;
}

export interface Secret {
  apiVersion: "v1";
  kind: "Secret";
  metadata: ObjectMeta;
  /** base64 values by key. After decoding, `stringData` has been merged into it. */
  data?: Record<string, string>;
  /** Plain-text values by key, written into `data` on decoding (they win over `data`). */
  stringData?: Record<string, string>;
  /** "Opaque" by default; kubernetes.io/dockerconfigjson and others have required keys. */
  type?: string;
  immutable?: boolean;
}

export const SECRET_TYPE_OPAQUE = "Opaque";
export const SECRET_TYPE_DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson";
export const SECRET_TYPE_DOCKERCFG = "kubernetes.io/dockercfg";
export const DOCKER_CONFIG_JSON_KEY = ".dockerconfigjson";
export const DOCKERCFG_KEY = ".dockercfg";
