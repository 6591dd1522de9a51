/**
 * A zstd file as the zstd tool reads it: every frame, one after another (`cat a.zst b.zst`, pzstd's
 * output), skippable frames skipped (pzstd starts its files with one), and anything after the last
 * frame refused. zlib's decompressor stops at the end of the first frame and ignores the rest, so
 * the frames are told apart here, from their headers and block headers (RFC 8878, section 3.1),
 * without decompressing, and each goes through a decompressor of its own.
 * @module
 */
import { pipeline, Readable, type Transform } from 'node:stream';

/** A zstd stream whose frames are malformed, truncated or followed by other bytes. */
export class ZstdFramesError extends Error {
  override readonly name = 'ZstdFramesError';
}

const zstdMagic = 0xfd2fb528;
/** Skippable frames: magic 0x184D2A50 to 0x184D2A5F, then a 32-bit size and that many bytes. */
const isSkippableMagic = (magic: number) => magic >>> 4 === 0x184d2a5;

/** True when `data` starts like a zstd file: a frame, or a skippable frame. */
export function startsLikeZstd(data: Uint8Array): boolean {
  if (data.length < 4) return false;
  const magic = (data[0]! | (data[1]! << 8) | (data[2]! << 16) | (data[3]! << 24)) >>> 0;
  return magic === zstdMagic || isSkippableMagic(magic);
}

/** Bytes pulled from an async iterator on demand, counted from the start of the stream. */
class ByteReader {
  #buffer: Buffer = Buffer.alloc(0);
  #done = false;
  /** The offset of the first byte not taken yet. */
  offset = 0;

  constructor(readonly source: AsyncIterator<Buffer>) {}

  /** Pulls until `n` bytes are buffered or the stream ends; true when they are. */
  async fill(n: number): Promise<boolean> {
    while (this.#buffer.length < n && !this.#done) {
      const r = await this.source.next();
      if (r.done) this.#done = true;
      else this.#buffer = this.#buffer.length === 0 ? r.value : Buffer.concat([this.#buffer, r.value]);
    }
    return this.#buffer.length >= n;
  }

  /** The buffered bytes not taken yet. */
  get buffered(): number {
    return this.#buffer.length;
  }

  /** Byte `i` ahead (after a fill that covers it). */
  at(i: number): number {
    return this.#buffer[i]!;
  }

  /** Takes `n` buffered bytes. */
  take(n: number): Buffer {
    const out = this.#buffer.subarray(0, n);
    this.#buffer = this.#buffer.subarray(n);
    this.offset += n;
    return out;
  }

  /** Takes `n` bytes, a chunk at a time as they come (a block may be larger than one read). */
  async *takeStreamed(n: number, what: string): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (this.#buffer.length === 0 && !(await this.fill(1)))
        throw new ZstdFramesError(`the zstd stream ends inside ${what} (truncated file?)`);
      const piece = this.take(Math.min(left, this.#buffer.length));
      left -= piece.length;
      yield piece;
    }
  }
}

/** Field sizes of a frame header, from its descriptor byte. */
function headerBytes(descriptor: number): number {
  const singleSegment = (descriptor >> 5) & 1;
  const contentSize = [singleSegment, 2, 4, 8][descriptor >> 6]!;
  const dictionaryId = [0, 1, 2, 4][descriptor & 3]!;
  return 4 + 1 + (singleSegment ? 0 : 1) + dictionaryId + contentSize;
}

/** The bytes of the frame starting at the reader's position (its magic checked already), as they come. */
async function* frameBytes(reader: ByteReader, frame: number): AsyncGenerator<Buffer> {
  const what = `frame ${frame}`;
  if (!(await reader.fill(5))) throw new ZstdFramesError(`the zstd stream ends inside the header of ${what} (truncated file?)`);
  const descriptor = reader.at(4);
  if (descriptor & 0x08) throw new ZstdFramesError(`${what} has a reserved bit set in its header: not a zstd frame (corrupt file?)`);
  const checksum = (descriptor >> 2) & 1;
  const header = headerBytes(descriptor);
  if (!(await reader.fill(header))) throw new ZstdFramesError(`the zstd stream ends inside the header of ${what} (truncated file?)`);
  yield reader.take(header);
  for (let last = false; !last; ) {
    if (!(await reader.fill(3))) throw new ZstdFramesError(`the zstd stream ends inside ${what}: a block is missing (truncated file?)`);
    const blockHeader = reader.at(0) | (reader.at(1) << 8) | (reader.at(2) << 16);
    last = (blockHeader & 1) === 1;
    const type = (blockHeader >> 1) & 3;
    if (type === 3) throw new ZstdFramesError(`${what} has a block of the reserved type: not a zstd frame (corrupt file?)`);
    const size = type === 1 ? 1 : blockHeader >>> 3; // an RLE block holds one byte, repeated
    yield reader.take(3);
    yield* reader.takeStreamed(size, what);
  }
  if (checksum) {
    if (!(await reader.fill(4))) throw new ZstdFramesError(`the zstd stream ends inside the checksum of ${what} (truncated file?)`);
    yield reader.take(4);
  }
}

/**
 * The content of a zstd stream (`input`, the compressed bytes): every frame decompressed in turn by a
 * fresh `decompressor()`, skippable frames skipped. A stream without a frame, a truncated or malformed
 * frame, and bytes after the last frame are a {@link ZstdFramesError}; the decompressor's own errors
 * pass through.
 */
export async function* zstdFrames(input: AsyncIterable<Buffer>, decompressor: () => Transform): AsyncGenerator<Buffer> {
  const reader = new ByteReader(input[Symbol.asyncIterator]());
  let frames = 0;
  for (;;) {
    if (!(await reader.fill(4))) {
      if (reader.buffered === 0 && frames > 0) return;
      const at = reader.offset;
      throw new ZstdFramesError(
        frames === 0
          ? 'the zstd stream holds no frame (truncated file?)'
          : `${reader.buffered} byte(s) after the last zstd frame, at byte ${at}: not a frame (trailing garbage, or a truncated file)`,
      );
    }
    const magic = (reader.at(0) | (reader.at(1) << 8) | (reader.at(2) << 16) | (reader.at(3) << 24)) >>> 0;
    if (isSkippableMagic(magic)) {
      if (!(await reader.fill(8))) throw new ZstdFramesError('the zstd stream ends inside a skippable frame (truncated file?)');
      const size = reader.take(8).readUInt32LE(4);
      for await (const _ of reader.takeStreamed(size, 'a skippable frame')) {
        // skipped: a skippable frame holds metadata (pzstd's frame sizes), not content
      }
      continue;
    }
    if (magic !== zstdMagic) {
      throw new ZstdFramesError(
        `bytes after the last zstd frame, at byte ${reader.offset}, are not a frame (trailing garbage, or another file appended)`,
      );
    }
    const d = decompressor();
    pipeline(Readable.from(frameBytes(reader, frames + 1)), d, () => undefined); // errors reach `d`, and its reader below
    yield* d as AsyncIterable<Buffer>;
    frames++;
  }
}
