// The worker (build/index.js) with a deliveries consumer that dies on chosen deliveries: a
// batch holding an event id listed in TEST_CONSUMER_DIES_ON (comma-separated) throws before
// the consumer runs, as an invocation that spends its CPU or memory on a delivery every time
// would, so no failure is ever recorded on the row. For the test that such a delivery still
// goes dead (interface §3) instead of being handed back by the dead-letter queue for ever.
import { call } from "./ours.mjs";

function dies(batch, env) {
  const doomed = String(env.TEST_CONSUMER_DIES_ON ?? "").split(",");
  return batch.queue === "paymos-deliveries" && batch.messages.some((m) => doomed.includes(m.body?.event_id));
}

export default {
  fetch: (request, env, ctx) => call("fetch", request, env, ctx),
  queue(batch, env, ctx) {
    if (dies(batch, env)) throw new Error("simulated consumer death");
    return call("queue", batch, env, ctx);
  },
  scheduled: (event, env, ctx) => call("scheduled", event, env, ctx),
};
