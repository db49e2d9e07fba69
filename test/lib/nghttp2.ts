// nghttp2's HPACK encoder and decoder through FFI (libnghttp2, Debian's libnghttp2-14, which
// scripts/setup installs): an independent implementation to check ours against.
import { dlopen, FFIType, type Pointer, ptr, toArrayBuffer } from "bun:ffi";

const lib = dlopen("libnghttp2.so.14", {
  nghttp2_hd_deflate_new: { args: [FFIType.ptr, FFIType.u64], returns: FFIType.i32 },
  nghttp2_hd_deflate_hd: {
    args: [FFIType.u64, FFIType.ptr, FFIType.u64, FFIType.ptr, FFIType.u64],
    returns: FFIType.i64,
  },
  nghttp2_hd_deflate_del: { args: [FFIType.u64], returns: FFIType.void },
  nghttp2_hd_inflate_new: { args: [FFIType.ptr], returns: FFIType.i32 },
  nghttp2_hd_inflate_hd2: {
    args: [FFIType.u64, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.u64, FFIType.i32],
    returns: FFIType.i64,
  },
  nghttp2_hd_inflate_end_headers: { args: [FFIType.u64], returns: FFIType.i32 },
  nghttp2_hd_inflate_del: { args: [FFIType.u64], returns: FFIType.void },
});

/** sizeof(nghttp2_nv) on 64-bit Linux: two pointers, two size_t, a flag byte, padding. */
const NV_SIZE = 40;

function newContext(create: (out: Pointer) => number): bigint {
  const out = new BigUint64Array(1);
  if (create(ptr(out)) !== 0) throw new Error("nghttp2: cannot create an HPACK context");
  return out[0] as bigint;
}

/** An nghttp2 HPACK encoder with its own dynamic table (Huffman coding where it is shorter). */
export function nghttp2Deflater(tableSize = 4096) {
  const ctx = newContext((out) => lib.symbols.nghttp2_hd_deflate_new(out, tableSize));
  return {
    encode(fields: [Buffer, Buffer][]): Buffer {
      const nva = Buffer.alloc(NV_SIZE * fields.length);
      const keep: Buffer[] = [];
      fields.forEach(([name, value], i) => {
        const n = Buffer.concat([name, Buffer.alloc(1)]);
        const v = Buffer.concat([value, Buffer.alloc(1)]);
        keep.push(n, v);
        nva.writeBigUInt64LE(BigInt(ptr(n)), i * NV_SIZE);
        nva.writeBigUInt64LE(BigInt(ptr(v)), i * NV_SIZE + 8);
        nva.writeBigUInt64LE(BigInt(name.length), i * NV_SIZE + 16);
        nva.writeBigUInt64LE(BigInt(value.length), i * NV_SIZE + 24);
      });
      const out = Buffer.alloc(64 * 1024);
      const n = Number(
        lib.symbols.nghttp2_hd_deflate_hd(ctx, ptr(out), out.length, ptr(nva), fields.length),
      );
      if (n < 0) throw new Error(`nghttp2_hd_deflate_hd failed: ${n}`);
      void keep;
      return Buffer.from(out.subarray(0, n));
    },
    close: () => lib.symbols.nghttp2_hd_deflate_del(ctx),
  };
}

/** An nghttp2 HPACK decoder of one connection. */
export function nghttp2Inflater() {
  const ctx = newContext((out) => lib.symbols.nghttp2_hd_inflate_new(out));
  return {
    decode(block: Buffer): [string, string][] {
      const fields: [string, string][] = [];
      const nv = Buffer.alloc(NV_SIZE);
      const flags = new Int32Array(1);
      let at = 0;
      for (;;) {
        const rest = block.subarray(at);
        const n = Number(
          lib.symbols.nghttp2_hd_inflate_hd2(
            ctx,
            ptr(nv),
            ptr(flags),
            rest.length ? ptr(rest) : 0,
            rest.length,
            1,
          ),
        );
        if (n < 0) throw new Error(`nghttp2_hd_inflate_hd2 failed: ${n}`);
        at += n;
        if ((flags[0] as number) & 0x02) {
          // NGHTTP2_HD_INFLATE_EMIT: read the name and value it points at.
          const read = (p: bigint, len: bigint) =>
            Buffer.from(toArrayBuffer(Number(p) as Pointer, 0, Number(len))).toString("utf8");
          fields.push([
            read(nv.readBigUInt64LE(0), nv.readBigUInt64LE(16)),
            read(nv.readBigUInt64LE(8), nv.readBigUInt64LE(24)),
          ]);
        }
        if ((flags[0] as number) & 0x01) break; // NGHTTP2_HD_INFLATE_FINAL
        if (n === 0 && at >= block.length && !((flags[0] as number) & 0x02)) break;
      }
      lib.symbols.nghttp2_hd_inflate_end_headers(ctx);
      return fields;
    },
    close: () => lib.symbols.nghttp2_hd_inflate_del(ctx),
  };
}
