// The platform floor: a worker that does nothing but answer. Same runtime, same harness.
export default {
  async fetch() {
    return new Response('{"received":true,"duplicate":false}', { headers: { "content-type": "application/json" } });
  },
};
