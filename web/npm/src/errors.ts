import { ERROR_CODES, type ErrorCode } from "./contract.js";

/** Every error the engine throws: `code` says what went wrong (see ErrorCode). */
export class TandemError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string) {
    super(message);
    this.name = code === "aborted" ? "AbortError" : "TandemError";
    this.code = code;
  }
}

/** Turns anything thrown (a wasm error with a code, a DOMException, a string) into a TandemError. */
export function toTandemError(e: unknown, fallback: ErrorCode = "engine_error"): TandemError {
  if (e instanceof TandemError) return e;
  const any = e as { code?: unknown; message?: unknown; name?: unknown } | undefined;
  const message = typeof any?.message === "string" ? any.message : String(e);
  const code = ERROR_CODES.find((c) => c === any?.code);
  if (code) return new TandemError(code, message);
  if (any?.name === "AbortError") return new TandemError("aborted", message);
  return new TandemError(fallback, message);
}
