/* tslint:disable */
/* eslint-disable */
export const memory: WebAssembly.Memory;
export const __wbg_engine_free: (a: number, b: number) => void;
export const engine_chat: (a: number, b: any, c: any, d: any) => any;
export const engine_create: (a: any) => any;
export const engine_info: (a: number) => any;
export const engine_load: (a: number, b: any, c: number, d: any, e: any) => any;
export const engine_stop: (a: number) => void;
export const engine_unload: (a: number) => [number, number];
export const version: () => [number, number];
export const wasm_bindgen__convert__closures_____invoke__h0531fd743f4bc429: (a: number, b: number, c: any) => [number, number];
export const wasm_bindgen__convert__closures_____invoke__h24dcee53f208390d: (a: number, b: number, c: any) => [number, number];
export const wasm_bindgen__convert__closures_____invoke__h24dcee53f208390d_12: (a: number, b: number, c: any) => [number, number];
export const wasm_bindgen__convert__closures_____invoke__h24dcee53f208390d_13: (a: number, b: number, c: any) => [number, number];
export const wasm_bindgen__convert__closures_____invoke__h8c223939539c9d7c: (a: number, b: number, c: any, d: any) => void;
export const wasm_bindgen__convert__closures_____invoke__hb2685f15506e6104: (a: number, b: number, c: any) => void;
export const wasm_bindgen__convert__closures_____invoke__hb2685f15506e6104_11: (a: number, b: number, c: any) => void;
export const __wbindgen_malloc: (a: number, b: number) => number;
export const __wbindgen_realloc: (a: number, b: number, c: number, d: number) => number;
export const __wbindgen_free: (a: number, b: number, c: number) => void;
export const __wbindgen_exn_store: (a: number) => void;
export const __externref_table_alloc: () => number;
export const __wbindgen_externrefs: WebAssembly.Table;
export const __wbindgen_destroy_closure: (a: number, b: number) => void;
export const __externref_table_dealloc: (a: number) => void;
export const __wbindgen_start: () => void;
