/**
 * Why a download failed. "interrupted": the link was cut or the body ended early (the part is
 * kept: try again to resume); "http": the server refused; "gzip": the bytes are not gzip;
 * "size" and "sha256": the bytes are not the release the manifest describes (part and output
 * removed: the next try starts over).
 */
export type DownloadFailure = "interrupted" | "http" | "gzip" | "size" | "sha256";

export class DownloadError extends Error {
  constructor(
    readonly reason: DownloadFailure,
    message: string,
  ) {
    super(message);
    this.name = "DownloadError";
  }
}
