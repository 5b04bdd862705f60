// npm/src/errors.ts
var TandemError = class extends Error {
  code;
  constructor(code, message) {
    super(message);
    this.name = code === "aborted" ? "AbortError" : "TandemError";
    this.code = code;
  }
};
function toTandemError(e, fallback = "engine_error") {
  if (e instanceof TandemError) return e;
  const any = e;
  const message = typeof any?.message === "string" ? any.message : String(e);
  if (typeof any?.code === "string") return new TandemError(any.code, message);
  if (any?.name === "AbortError") return new TandemError("aborted", message);
  return new TandemError(fallback, message);
}

export {
  TandemError,
  toTandemError
};
//# sourceMappingURL=chunk-W7IN3UGP.js.map
