import type { Reply, Request } from "./protocol.js";
import type { AdapterInfo, ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, EngineOptions, LoadProgress, ModelInfo, ModelSource } from "./types.js";
export * from "./types.js";
export { TandemError } from "./errors.js";
export declare const CACHE_NAME = "tandem-models";
type Listener = (r: Reply) => void;
/** A channel to the engine: a worker, or the runtime on this thread. */
interface Transport {
    send(req: Request): void;
    listeners: Map<number, Listener>;
    close(): void;
}
export declare class Engine {
    private transport;
    private options;
    /** The adapter and the features in use (f16, subgroups). */
    readonly adapter: AdapterInfo;
    /** The loaded model, once loaded. */
    model: ModelInfo | null;
    private busy;
    readonly chat: {
        completions: {
            create: {
                (req: ChatCompletionRequest & {
                    stream: true;
                }, opts?: {
                    signal?: AbortSignal;
                }): Promise<AsyncIterable<ChatCompletionChunk>>;
                (req: ChatCompletionRequest & {
                    stream?: false;
                }, opts?: {
                    signal?: AbortSignal;
                }): Promise<ChatCompletion>;
                (req: ChatCompletionRequest, opts?: {
                    signal?: AbortSignal;
                }): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>>;
            };
        };
    };
    /** @internal */
    constructor(transport: Transport, adapter: AdapterInfo, options: EngineOptions);
    /** Loads a model (a URL or a File/Blob), replacing the loaded one. */
    load(model: ModelSource, onProgress?: (p: LoadProgress) => void): Promise<ModelInfo>;
    /** Stops the running generation (its stream ends with finish_reason "abort"). */
    stop(): Promise<void>;
    /** Frees the model's GPU memory. */
    unload(): Promise<void>;
    /** Ends the engine (and its worker). */
    dispose(): Promise<void>;
    private create;
}
/**
 * Opens the GPU (in a worker by default) and, if `model` is given, loads it. Throws a TandemError
 * with code "no_webgpu" where the browser has no WebGPU.
 */
export declare function createEngine(options?: EngineOptions): Promise<Engine>;
/** The models kept in the Cache API by earlier loads: URL and size in bytes. */
export declare function listCachedModels(): Promise<{
    url: string;
    bytes: number;
}[]>;
/** Removes a model from the cache. */
export declare function deleteCachedModel(url: string): Promise<boolean>;
