import {
  handle
} from "./chunk-5NXKT6AJ.js";
import "./chunk-W7IN3UGP.js";

// npm/src/worker.ts
var scope = globalThis;
scope.onmessage = (ev) => {
  void handle(ev.data, (reply) => scope.postMessage(reply));
};
//# sourceMappingURL=worker.js.map
