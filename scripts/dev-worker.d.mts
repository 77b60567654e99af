// Types of scripts/dev-worker.mjs, for the TypeScript tests that start the worker.
import type { ChildProcess } from "node:child_process";

export declare const ROOT: string;
export declare function freePort(): Promise<number>;
/** Whether `port` on 127.0.0.1 is free to listen on. */
export declare function portIsFree(port: number): Promise<boolean>;

export interface DevWorkerOptions {
  port?: number;
  persistTo?: string;
  tokens?: readonly { name: string; token: string; scopes: readonly string[] }[];
  vars?: Record<string, string>;
  stdio?: "inherit" | "pipe";
  logLevel?: "debug" | "info" | "log" | "warn" | "error" | "none";
  timeoutMs?: number;
}

export interface DevWorker {
  readonly url: string;
  readonly port: number;
  readonly persistTo: string;
  readonly child: ChildProcess;
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export declare function startDevWorker(options?: DevWorkerOptions): Promise<DevWorker>;
