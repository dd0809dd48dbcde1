// The Worker's entry (scripts/build.sh bundles it into build/index.js): worker-build's module
// (build/glue.js: the wasm, its glue and the entrypoint class), with the deliveries that the
// receive path's JavaScript driver takes (src/receive.js) handed to it first.
import { env } from "cloudflare:workers";
import Glue from "../build/glue.js";
import { prepareReceive, receiveDelivery } from "./receive.js";

// worker-build's class holds the wasm's handlers as methods, each reading `this.env` and
// `this.ctx`, and one method per function the wasm exports (the driver's among them)
const proto = Glue.prototype;
const wasm = {};
for (const name of ["receive_setup", "receive_check", "receive_unreadable", "receive_failed", "receive_done"]) {
  if (typeof proto[name] !== "function") throw new Error(`src/worker.js: the wasm exports no ${name}`);
  wasm[name] = proto[name];
}

// the receive path's once-per-isolate setup, read at the isolate's start
prepareReceive(wasm, env);

// The default export is a plain handler object, not the class: the runtime builds an instance
// of an entrypoint class for every request (0.987× a duplicate's CPU without it, interleaved,
// bench/README.md "The entry as an object"), and a class would offer each of its methods over
// RPC to a Worker bound to this one, the wasm's exports among them. The handlers get what the
// class's instance would have carried.
export default {
  fetch(request, env, ctx) {
    return receiveDelivery(wasm, request, env, ctx) ?? proto.fetch.call({ env, ctx }, request);
  },
  queue(batch, env, ctx) {
    return proto.queue.call({ env, ctx }, batch);
  },
  scheduled(event, env, ctx) {
    return proto.scheduled.call({ env, ctx }, event);
  },
};
