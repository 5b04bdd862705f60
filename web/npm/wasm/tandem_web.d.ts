/* tslint:disable */
/* eslint-disable */

/**
 * The engine: one GPU device, at most one model.
 */
export class Engine {
    private constructor();
    free(): void;
    [Symbol.dispose](): void;
    /**
     * One chat turn: `messages` `[{ role, content }]` rendered with the model's chat template,
     * the answer streamed to `on_text(piece)` (return `false` from it to stop). Resolves to
     * `{ text, finish_reason, prompt_tokens, completion_tokens, prefill_tokens_per_second, ... }`.
     */
    chat(messages: any, options: any, on_text: Function): Promise<any>;
    /**
     * Opens the adapter and the device (`options`: `{ portable?: boolean }`).
     */
    static create(options: any): Promise<any>;
    /**
     * The adapter and the features in use.
     */
    info(): any;
    /**
     * Loads a model from a byte stream reader of its GGUF file of `file_len` bytes. `on_progress`
     * gets `{ phase: "header" | "tensors" | "pipelines" | "ready", ... }`. The reader is read
     * to the end of the tensor data; on an error (bad header, model too large for the adapter) it
     * is left where it stopped, and the caller cancels it.
     */
    load(reader: any, file_len: number, options: any, on_progress: Function): Promise<any>;
    /**
     * Stops the running chat turn after the current token.
     */
    stop(): void;
    /**
     * Drops the model and its GPU buffers (the device stays).
     */
    unload(): void;
}

/**
 * The engine crate's version, for the page's footer.
 */
export function version(): string;

export type InitInput = RequestInfo | URL | Response | BufferSource | WebAssembly.Module;

export interface InitOutput {
    readonly memory: WebAssembly.Memory;
    readonly __wbg_engine_free: (a: number, b: number) => void;
    readonly engine_chat: (a: number, b: any, c: any, d: any) => any;
    readonly engine_create: (a: any) => any;
    readonly engine_info: (a: number) => any;
    readonly engine_load: (a: number, b: any, c: number, d: any, e: any) => any;
    readonly engine_stop: (a: number) => void;
    readonly engine_unload: (a: number) => [number, number];
    readonly version: () => [number, number];
    readonly wasm_bindgen__convert__closures_____invoke__h0531fd743f4bc429: (a: number, b: number, c: any) => [number, number];
    readonly wasm_bindgen__convert__closures_____invoke__h24dcee53f208390d: (a: number, b: number, c: any) => [number, number];
    readonly wasm_bindgen__convert__closures_____invoke__h24dcee53f208390d_12: (a: number, b: number, c: any) => [number, number];
    readonly wasm_bindgen__convert__closures_____invoke__h24dcee53f208390d_13: (a: number, b: number, c: any) => [number, number];
    readonly wasm_bindgen__convert__closures_____invoke__h8c223939539c9d7c: (a: number, b: number, c: any, d: any) => void;
    readonly wasm_bindgen__convert__closures_____invoke__hb2685f15506e6104: (a: number, b: number, c: any) => void;
    readonly wasm_bindgen__convert__closures_____invoke__hb2685f15506e6104_11: (a: number, b: number, c: any) => void;
    readonly __wbindgen_malloc: (a: number, b: number) => number;
    readonly __wbindgen_realloc: (a: number, b: number, c: number, d: number) => number;
    readonly __wbindgen_free: (a: number, b: number, c: number) => void;
    readonly __wbindgen_exn_store: (a: number) => void;
    readonly __externref_table_alloc: () => number;
    readonly __wbindgen_externrefs: WebAssembly.Table;
    readonly __wbindgen_destroy_closure: (a: number, b: number) => void;
    readonly __externref_table_dealloc: (a: number) => void;
    readonly __wbindgen_start: () => void;
}

export type SyncInitInput = BufferSource | WebAssembly.Module;

/**
 * Instantiates the given `module`, which can either be bytes or
 * a precompiled `WebAssembly.Module`.
 *
 * @param {{ module: SyncInitInput }} module - Passing `SyncInitInput` directly is deprecated.
 *
 * @returns {InitOutput}
 */
export function initSync(module: { module: SyncInitInput } | SyncInitInput): InitOutput;

/**
 * If `module_or_path` is {RequestInfo} or {URL}, makes a request and
 * for everything else, calls `WebAssembly.instantiate` directly.
 *
 * @param {{ module_or_path: InitInput | Promise<InitInput> }} module_or_path - Passing `InitInput` directly is deprecated.
 *
 * @returns {Promise<InitOutput>}
 */
export default function __wbg_init (module_or_path?: { module_or_path: InitInput | Promise<InitInput> } | InitInput | Promise<InitInput>): Promise<InitOutput>;
