import {
  CACHE_NAME,
  handle
} from "./chunk-5NXKT6AJ.js";
import "./chunk-W7IN3UGP.js";
export {
  CACHE_NAME,
  handle
};
//# sourceMappingURL=runtime-BICQ7C4Q.js.map
