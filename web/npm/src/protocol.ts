/** Messages between the package's front (index.ts) and the engine's side (runtime.ts). */
import type { ChatOptions } from "./contract.js";
import type { BenchOptions, ChatMessage, ErrorCode } from "./types.js";

export type Request =
  | { id: number; type: "init"; portable?: boolean; wasm?: unknown }
  | { id: number; type: "load"; model: string | Blob; cache?: boolean; context?: number }
  | { id: number; type: "chat"; messages: ChatMessage[]; options: ChatOptions }
  | { id: number; type: "complete"; prompt: string; options: ChatOptions }
  | { id: number; type: "bench"; options: BenchOptions }
  | { id: number; type: "stop" }
  | { id: number; type: "unload" };

export type Reply =
  | { id: number; type: "progress"; value: Record<string, unknown> }
  | { id: number; type: "token"; value: string }
  | { id: number; type: "result"; value: unknown }
  | { id: number; type: "error"; code: ErrorCode; message: string };
