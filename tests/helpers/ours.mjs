// The worker (build/index.js) called as the runtime calls it: for the wrappers that change what
// one of its handlers sees (d1-down.mjs, consumer-dies.mjs), whichever shape its default export
// has (worker-build's entrypoint class, or a plain object).
import Ours from "../../build/index.js";

export const call = (method, arg, env, ctx) => (typeof Ours === "function" ? new Ours(ctx, env)[method](arg) : Ours[method](arg, env, ctx));
