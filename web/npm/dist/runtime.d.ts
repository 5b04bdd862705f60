import type { Request, Reply } from "./protocol.js";
export declare const CACHE_NAME = "tandem-models";
type Post = (m: Reply) => void;
/** Answers one request; replies go through `post` (progress and tokens before the result). */
export declare function handle(req: Request, post: Post): Promise<void>;
export {};
