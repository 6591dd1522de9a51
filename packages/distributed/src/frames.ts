/**
 * The framing of the TCP store's messages: a frame is a u32 length (little endian) of what
 * follows, a u32 length of a JSON header, the header, and a binary body. {@link FrameReader} cuts
 * a socket's chunks back into frames.
 * @module
 */

/** The header every frame carries: its type, and what that type needs. */
export interface FrameHeader {
  t: string;
  [key: string]: unknown;
}

export interface Frame {
  header: FrameHeader;
  body: Uint8Array;
}

/** The largest frame accepted (a guard against a peer that speaks something else): 4 GiB - 1. */
const maxFrameBytes = 0xffff_ffff;

/** One frame's bytes. */
export function encodeFrame(header: FrameHeader, body: Uint8Array = new Uint8Array(0)): Buffer {
  const json = Buffer.from(JSON.stringify(header));
  const total = 4 + json.byteLength + body.byteLength;
  if (total > maxFrameBytes) throw new RangeError(`Expected a message below 4 GiB but received ${total} bytes`);
  const head = Buffer.allocUnsafe(8);
  head.writeUInt32LE(total, 0);
  head.writeUInt32LE(json.byteLength, 4);
  return Buffer.concat([head, json, body]);
}

/** Frames from a stream of chunks; throws on bytes that are not frames (another protocol on the port). */
export class FrameReader {
  #chunks: Buffer[] = [];
  #buffered = 0;
  /** The current frame's bytes (length prefix included) and header bytes, once its first 8 bytes are in. */
  #need: { bytes: number; json: number } | undefined;

  /** The frames completed by `chunk`. */
  push(chunk: Buffer): Frame[] {
    this.#chunks.push(chunk);
    this.#buffered += chunk.byteLength;
    const frames: Frame[] = [];
    for (;;) {
      if (!this.#need) {
        if (this.#buffered < 8) return frames;
        const head = this.#chunks[0]!.byteLength >= 8 ? this.#chunks[0]! : this.#flatten();
        const total = head.readUInt32LE(0);
        const json = head.readUInt32LE(4);
        if (json + 4 > total || json > 1 << 20) throw new Error('not a gpumem store message (bad frame lengths)');
        this.#need = { bytes: 4 + total, json };
      }
      if (this.#buffered < this.#need.bytes) return frames;
      const all = this.#flatten();
      const { bytes, json } = this.#need;
      this.#need = undefined;
      let header: FrameHeader;
      try {
        header = JSON.parse(all.subarray(8, 8 + json).toString('utf8')) as FrameHeader;
      } catch {
        throw new Error('not a gpumem store message (bad header)');
      }
      if (header === null || typeof header !== 'object' || typeof header.t !== 'string')
        throw new Error('not a gpumem store message (no type)');
      frames.push({ header, body: all.subarray(8 + json, bytes) });
      const rest = all.subarray(bytes);
      this.#chunks = rest.byteLength > 0 ? [rest] : [];
      this.#buffered = rest.byteLength;
    }
  }

  #flatten(): Buffer {
    const all = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks);
    this.#chunks = [all];
    return all;
  }
}
