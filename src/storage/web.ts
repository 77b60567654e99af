/**
 * The few Web-platform APIs the storage primitives use (`ReadableStream`,
 * `crypto.subtle`, `crypto.getRandomValues`, `AbortController`), typed by the
 * members used and looked up lazily on `globalThis`, so the core compiles
 * without DOM or Node typings and loads anywhere; a runtime that lacks one
 * fails only the call that needs it, with a message saying what is missing.
 */

/** A reader of a {@link ByteStream} (the members of `ReadableStreamDefaultReader` used here). */
export interface ByteStreamReader {
  read(): Promise<{ done: true; value?: undefined } | { done: false; value: Uint8Array }>;
  releaseLock(): void;
  cancel(reason?: unknown): Promise<void>;
}

/** A `ReadableStream<Uint8Array>`, typed by the member the core uses; a real one fits. */
export interface ByteStream {
  getReader(): ByteStreamReader;
}

/**
 * The stream type handed out (`Blobs.get`): the platform's own
 * `ReadableStream` wherever its typings are loaded, {@link ByteStream} where
 * they are not.
 */
export type PlatformByteStream = typeof globalThis extends { ReadableStream: { prototype: infer S } } ? S : ByteStream;

/** The controller a pull source is handed (`ReadableStreamDefaultController<Uint8Array>`). */
export interface ByteStreamController {
  enqueue(chunk: Uint8Array): void;
  close(): void;
  error(reason: unknown): void;
}

/** A pull-based underlying source. */
export interface ByteSource {
  pull(controller: ByteStreamController): Promise<void>;
  cancel?(reason: unknown): void;
}

type ReadableStreamConstructor = new (source: ByteSource, strategy?: { highWaterMark?: number }) => ByteStream;

function platform<T>(name: string): T {
  const value = (globalThis as Record<string, unknown>)[name];
  if (value === undefined) throw new Error(`isostore storage needs the Web-standard ${name} (globalThis.${name})`);
  return value as T;
}

/** A new `ReadableStream` over a pull source that is asked for one chunk at a time. */
export function newByteStream(source: ByteSource): ByteStream {
  const Ctor = platform<ReadableStreamConstructor>("ReadableStream");
  return new Ctor(source, { highWaterMark: 0 });
}

/** `crypto.subtle.digest`, looked up at call time. */
export async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  const crypto = platform<{ subtle?: { digest(algorithm: string, data: Uint8Array): Promise<ArrayBuffer> } }>("crypto");
  if (!crypto.subtle) throw new Error("isostore storage needs the Web Crypto API (globalThis.crypto.subtle)");
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

/** `count` bytes from `crypto.getRandomValues`, looked up at call time. */
export function randomBytes(count: number): Uint8Array {
  const crypto = platform<{ getRandomValues?<T extends Uint8Array>(array: T): T }>("crypto");
  if (!crypto.getRandomValues) throw new Error("isostore needs the Web Crypto API (globalThis.crypto.getRandomValues)");
  return crypto.getRandomValues(new Uint8Array(count));
}

/** Lowercase hex of `bytes`. */
export function toHex(bytes: Uint8Array): string {
  let text = "";
  for (const byte of bytes) text += byte.toString(16).padStart(2, "0");
  return text;
}

/** An `AbortSignal` with the members the core uses, plus a way to abort it. */
export interface SignalSource {
  readonly signal: {
    readonly aborted: boolean;
    readonly reason?: unknown;
    addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
    removeEventListener(type: "abort", listener: () => void): void;
  };
  abort(reason: unknown): void;
}

/** A new `AbortController`. */
export function newAbortController(): SignalSource {
  const Ctor = platform<new () => SignalSource>("AbortController");
  return new Ctor();
}

/**
 * %TypedArray%.prototype: its `Symbol.toStringTag` getter reads an array's
 * internal type (an object defining the symbol cannot spoof it) and answers
 * `undefined` for anything that is not a typed array.
 */
const TYPED_ARRAY_PROTOTYPE = Object.getPrototypeOf(Uint8Array.prototype) as object;

/** Whether `value` is a `Uint8Array` (from any realm; not an object merely claiming to be one). */
export function isBytes(value: unknown): value is Uint8Array {
  return value instanceof Uint8Array || Reflect.get(TYPED_ARRAY_PROTOTYPE, Symbol.toStringTag, value) === "Uint8Array";
}

/** Whether two byte arrays hold the same bytes. */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

interface TextCodecs {
  readonly encoder: { encode(text: string): Uint8Array };
  readonly decoder: { decode(bytes: Uint8Array): string };
}
let codecs: TextCodecs | undefined;

function textCodecs(): TextCodecs {
  if (codecs === undefined) {
    const Encoder = platform<new () => TextCodecs["encoder"]>("TextEncoder");
    const Decoder = platform<new (label: string, options: { fatal: boolean }) => TextCodecs["decoder"]>("TextDecoder");
    codecs = { encoder: new Encoder(), decoder: new Decoder("utf-8", { fatal: true }) };
  }
  return codecs;
}

/** `text` as UTF-8. */
export function utf8Encode(text: string): Uint8Array {
  return textCodecs().encoder.encode(text);
}

/** UTF-8 `bytes` as text; throws on invalid UTF-8. */
export function utf8Decode(bytes: Uint8Array): string {
  return textCodecs().decoder.decode(bytes);
}
