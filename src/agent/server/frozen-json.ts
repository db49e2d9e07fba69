// JSON for the local API's lists and watches. The pod views (pod-views.ts) are frozen and stay
// the same object while unchanged, so each one's JSON is written once however often clients poll
// or however many watch. One FrozenJson serves one API server.

export class FrozenJson {
  /** The JSON text of each frozen object written so far; dropped with the object. */
  private readonly texts = new WeakMap<object, string>();

  /**
   * JSON.stringify(value), remembered for a frozen object. Object.isFrozen looks one level deep:
   * only objects frozen all the way down (the pod views) may be passed frozen.
   */
  text(value: object): string {
    let text = this.texts.get(value);
    if (text === undefined) {
      text = JSON.stringify(value);
      if (Object.isFrozen(value)) this.texts.set(value, text);
    }
    return text;
  }

  /**
   * A v1 list response, the same bytes as `json({apiVersion, kind, metadata: {}, items})` of
   * src/api/status.ts, with each frozen item's JSON reused.
   */
  list(kind: string, items: readonly object[]): Response {
    const parts = items.map((item) => this.text(item));
    const head = `{"apiVersion":"v1","kind":${JSON.stringify(kind)},"metadata":{},"items":[`;
    return new Response(`${head}${parts.join(",")}]}\n`, {
      headers: { "content-type": "application/json" },
    });
  }
}
