/** The Web Worker the engine runs in by default: requests in, replies out. */
import { handle } from "./runtime.js";
import type { Request } from "./protocol.js";

const scope = globalThis as unknown as {
  onmessage: ((ev: MessageEvent<Request>) => void) | null;
  postMessage(m: unknown): void;
};

scope.onmessage = (ev) => {
  void handle(ev.data, (reply) => scope.postMessage(reply));
};
