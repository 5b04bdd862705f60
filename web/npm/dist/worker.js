import {
  handle
} from "./chunk-M6OPCLZL.js";
import "./chunk-W7IN3UGP.js";

// npm/src/worker.ts
var scope = globalThis;
scope.onmessage = (ev) => {
  void handle(ev.data, (reply) => scope.postMessage(reply));
};
//# sourceMappingURL=worker.js.map
