// The platform floor: a worker that reads the request and answers, nothing else. Same runtime,
// same harness. (It reads the body: answering before it would reset keep-alive connections.)
export default {
  async fetch(request) {
    await request.arrayBuffer();
    return new Response('{"received":true,"duplicate":false}', { headers: { "content-type": "application/json" } });
  },
};
