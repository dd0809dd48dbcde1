// The glue floor's JavaScript twin (benchmark only; see crates/glue-floor/src/lib.rs): one
// header read, the body awaited, the receive log line, the fixed receipt, nothing else.
export default {
  async fetch(request) {
    const id = request.headers.get("x-webhook-id") ?? "";
    await request.arrayBuffer();
    console.log(JSON.stringify({ stage: "receive", event_id: id, outcome: "duplicate", status: 200 }));
    return new Response('{"received":true,"duplicate":true}', { headers: { "content-type": "application/json" } });
  },
};
