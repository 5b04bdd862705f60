import type { ErrorCode } from "./types.js";
/** Every error the engine throws: `code` says what went wrong (see ErrorCode). */
export declare class TandemError extends Error {
    readonly code: ErrorCode;
    constructor(code: ErrorCode, message: string);
}
/** Turns anything thrown (a wasm error with a code, a DOMException, a string) into a TandemError. */
export declare function toTandemError(e: unknown, fallback?: ErrorCode): TandemError;
