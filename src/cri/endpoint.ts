// CRI endpoints: only local unix sockets, written as `unix:///absolute/path`.

export interface CriEndpoint {
  /** The endpoint as given, e.g. "unix:///run/containerd/containerd.sock". */
  endpoint: string;
  /** Absolute path of the socket. */
  socketPath: string;
}

/** Parses and checks a CRI endpoint; throws an Error naming the bad value otherwise. */
export function parseCriEndpoint(endpoint: string): CriEndpoint {
  const prefix = "unix://";
  const hint =
    'expected "unix:///absolute/path/to/socket", e.g. "unix:///run/containerd/containerd.sock"';
  if (!endpoint.startsWith(prefix)) {
    throw new Error(`Invalid CRI endpoint ${JSON.stringify(endpoint)}: ${hint}`);
  }
  const socketPath = endpoint.slice(prefix.length);
  if (!socketPath.startsWith("/") || socketPath.length < 2 || socketPath.endsWith("/")) {
    throw new Error(
      `Invalid CRI endpoint ${JSON.stringify(endpoint)}: socket path must be absolute; ${hint}`,
    );
  }
  if (/[\0?#]/.test(socketPath)) {
    throw new Error(
      `Invalid CRI endpoint ${JSON.stringify(endpoint)}: socket path contains "?", "#" or NUL`,
    );
  }
  return { endpoint, socketPath };
}
