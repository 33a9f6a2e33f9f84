// Output assembled as bytes in a buffer that is handed out whole when full, for a stream that
// writes many small pieces (the NDJSON export: ~20 per line, a million lines). Building a
// string per line and joining them cost a cons-string flattening a line, and the stream encoded
// the result to UTF-8 once more; writing the pieces in place does neither (docs/performance.md,
// "What the profiles showed").
import { integerText } from '../../../tlog/integer-text.js';

/**
 * Under glibc's mmap threshold (128 KB, as the README sets it): a 256 KB buffer was a fresh
 * mapping each time, faulted in page by page; 64 KB ones are reused from the heap. 32 KB cost
 * more in the stream's per-chunk work than they saved (docs/performance.md, "What the profiles
 * showed").
 */
const DEFAULT_BYTES = 64 * 1024;

export class OutputBuffer {
  #buf: Buffer;
  #at = 0;
  readonly #size: number;

  constructor(size = DEFAULT_BYTES) {
    this.#size = size;
    this.#buf = Buffer.allocUnsafe(size);
  }

  /**
   * Makes room for `n` more bytes. Answers the bytes written so far when they had to be handed
   * out to make it (the caller sends them), else undefined.
   */
  room(n: number): Buffer | undefined {
    if (this.#at + n <= this.#buf.length) return undefined;
    const full = this.take();
    if (n > this.#buf.length) this.#buf = Buffer.allocUnsafe(n);
    return full;
  }

  /** The bytes written so far (undefined when none); writing goes on in a new buffer. */
  take(): Buffer | undefined {
    if (this.#at === 0) return undefined;
    const full = this.#buf.subarray(0, this.#at);
    this.#buf = Buffer.allocUnsafe(this.#size);
    this.#at = 0;
    return full;
  }

  /** Where the next byte goes in the current buffer (for again()). */
  get position(): number {
    return this.#at;
  }

  /** Writes again the bytes written at [start, end) of the current buffer (room() made room for them). */
  again(start: number, end: number): void {
    this.#at += this.#buf.copy(this.#buf, this.#at, start, end);
  }

  bytes(b: Uint8Array): void {
    this.#buf.set(b, this.#at);
    this.#at += b.length;
  }

  /** One byte: an ASCII character's code. */
  byte(c: number): void {
    this.#buf[this.#at++] = c;
  }

  /** A safe integer in decimal (integer-text.ts says why not String(n)). */
  integer(n: number): void {
    this.#at += this.#buf.write(integerText(n), this.#at, 'latin1');
  }

  /** A string of characters below U+0100, a byte each (base64, digits). */
  latin1(s: string): void {
    this.#at += this.#buf.write(s, this.#at, 'latin1');
  }

  utf8(s: string): void {
    this.#at += this.#buf.write(s, this.#at, 'utf8');
  }
}

/** Bytes a string may take in UTF-8: room() before utf8() needs no exact count. */
export const utf8Bound = (s: string): number => 3 * s.length;
