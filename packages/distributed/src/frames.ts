/**
 * The framing of the TCP store's messages: a frame is a u32 length (little endian) of what
 * follows, a u32 length of a JSON header, the header, and a binary body. {@link FrameReader} cuts
 * a socket's chunks back into frames, one at a time, and checks each frame's declared length
 * against its bound before it keeps the frame's bytes: a peer that has not yet said who it is
 * gets {@link maxGreetingBytes}, a rank that has {@link maxFrameBytes}.
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

/**
 * The largest frame (its length prefix's value) before a peer is admitted: a hello (with its token),
 * a welcome or a refusal. A stranger can make rank 0 hold no more than this per connection.
 */
export const maxGreetingBytes = 8 * 1024;

/** The largest frame between admitted ranks (a collective's whole body): 4 GiB - 1 after the prefix. */
export const maxFrameBytes = 0xffff_ffff;

/** The largest JSON header of any frame. */
const maxHeaderBytes = 1 << 20;

/** Bytes on a connection that are not frames of the store (another protocol on the port), or a frame past its bound. */
class FrameError extends Error {
  override readonly name = 'FrameError';
}

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

/** Frames from a stream of chunks; {@link FrameError} on bytes that are not frames or a frame past {@link limit}. */
export class FrameReader {
  /** The largest length prefix accepted now; raised once the peer is admitted. */
  limit: number;
  #chunks: Buffer[] = [];
  #buffered = 0;
  /** The current frame's bytes (length prefix included) and header bytes, once its first 8 bytes are in. */
  #need: { bytes: number; json: number } | undefined;

  constructor(limit: number = maxGreetingBytes) {
    this.limit = limit;
  }

  /** Keeps `chunk`; throws at once when the frame it continues declares more than {@link limit}. */
  push(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#buffered += chunk.byteLength;
    this.#head();
  }

  /** The next complete frame, or undefined until more bytes come. */
  next(): Frame | undefined {
    const need = this.#head();
    if (!need || this.#buffered < need.bytes) return undefined;
    const all = this.#flatten();
    this.#need = undefined;
    let header: FrameHeader;
    try {
      header = JSON.parse(all.subarray(8, 8 + need.json).toString('utf8')) as FrameHeader;
    } catch {
      throw new FrameError('not a gpumem store message (bad header)');
    }
    if (header === null || typeof header !== 'object' || typeof header.t !== 'string')
      throw new FrameError('not a gpumem store message (no type)');
    const frame = { header, body: all.subarray(8 + need.json, need.bytes) };
    const rest = all.subarray(need.bytes);
    this.#chunks = rest.byteLength > 0 ? [rest] : [];
    this.#buffered = rest.byteLength;
    return frame;
  }

  /** Every complete frame in what has come so far (for a peer whose frames all have the same bound). */
  drain(chunk: Buffer): Frame[] {
    this.push(chunk);
    const frames: Frame[] = [];
    for (let f = this.next(); f; f = this.next()) frames.push(f);
    return frames;
  }

  /** The current frame's lengths, read and checked once its first 8 bytes are in. */
  #head(): { bytes: number; json: number } | undefined {
    if (this.#need) return this.#need;
    if (this.#buffered < 8) return undefined;
    const head = this.#chunks[0]!.byteLength >= 8 ? this.#chunks[0]! : this.#flatten();
    const total = head.readUInt32LE(0);
    const json = head.readUInt32LE(4);
    if (json + 4 > total || json > maxHeaderBytes) throw new FrameError('not a gpumem store message (bad frame lengths)');
    if (total > this.limit) throw new FrameError(`a message of ${total} bytes, past the bound of ${this.limit} bytes`);
    this.#need = { bytes: 4 + total, json };
    return this.#need;
  }

  #flatten(): Buffer {
    const all = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks);
    this.#chunks = [all];
    return all;
  }
}
