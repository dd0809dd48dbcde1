// The Worker's entry (scripts/build.sh bundles it into build/index.js): worker-build's module
// (build/glue.js: the wasm, its glue and the entrypoint class), with the deliveries that the
// receive path's JavaScript driver takes (src/receive.js) handed to it first.
import { env } from "cloudflare:workers";
import Glue from "../build/glue.js";
import { prepareReceive, receiveDelivery } from "./receive.js";

export * from "../build/glue.js";

// worker-build makes each function the wasm exports a method of the entrypoint, which would
// let a Worker bound to this one call it over RPC: the driver's are taken off
const proto = Glue.prototype;
const wasm = {};
for (const name of ["receive_setup", "receive_check", "receive_unreadable", "receive_failed", "receive_done"]) {
  if (typeof proto[name] !== "function") throw new Error(`src/worker.js: the wasm exports no ${name}`);
  wasm[name] = proto[name];
  delete proto[name];
}

// the receive path's once-per-isolate setup, read at the isolate's start
prepareReceive(wasm, env);

export default class Receiver extends Glue {
  fetch(request) {
    return receiveDelivery(wasm, request, this.env, this.ctx) ?? super.fetch(request);
  }
}
