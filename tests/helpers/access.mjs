// Cloudflare Access for the tests, made with the npm package `jose` (an implementation no one
// here wrote): RSA keys, a JWKS stub serving {team domain}/cdn-cgi/access/certs on a free
// loopback port, tokens minted as Access mints them, and key rotation at the stub.
import http from "node:http";
import { SignJWT, UnsecuredJWT, exportJWK, exportSPKI, generateKeyPair, calculateJwkThumbprint } from "jose";

export const AUD = "6b1f3c0e5d9a4f7b8c2e1d0a9f8e7d6c5b4a39281706f5e4d3c2b1a0f9e8d7c6";
export const EMAIL = "operator@example.com";
export const SERVICE_TOKEN = "3f9a1c2b4d5e6f708192a3b4c5d6e7f8.access";

/** An RSA key pair (for RS256 unless `alg` says otherwise) with its kid (the JWK thumbprint, hex as Cloudflare's kids are). */
export async function newKey(alg = "RS256") {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true, modulusLength: 2048 });
  const jwk = await exportJWK(publicKey);
  const kid = Buffer.from(await calculateJwkThumbprint(jwk, "sha256"), "base64url").toString("hex");
  return { kid, publicKey, privateKey, jwk: { kid, kty: "RSA", alg: "RS256", use: "sig", e: jwk.e, n: jwk.n }, pem: await exportSPKI(publicKey) };
}

/**
 * The certs document's stub. `keys` is what it serves (newest last, the way `rotate` adds);
 * `hits` counts its requests to the certs path. `mode`: "ok", "hang" (never answers) or "fail" (500).
 * On a free loopback port unless `port` is given.
 * The document has Cloudflare's shape: `keys` (JWK) and `public_cert` / `public_certs`; the
 * PEM there is the SPKI public key (Cloudflare serves certificates; the receiver reads `keys`).
 */
export async function startJwksStub(keys, { port = 0 } = {}) {
  const stub = {
    keys: [...keys],
    hits: [],
    mode: "ok",
    url: "",
    document() {
      const current = this.keys[this.keys.length - 1];
      return {
        keys: this.keys.map((k) => k.jwk),
        public_cert: { kid: current.kid, cert: current.pem },
        public_certs: this.keys.map((k) => ({ kid: k.kid, cert: k.pem })),
      };
    },
    /** Access rotated its key: a new current key, the previous kept (as Access keeps it for 7 days). */
    async rotate() {
      const key = await newKey();
      this.keys = [...this.keys.slice(-1), key];
      return key;
    },
  };
  const hanging = new Set();
  const server = http.createServer((req, res) => {
    if (req.url !== "/cdn-cgi/access/certs") {
      res.writeHead(404).end();
      return;
    }
    stub.hits.push(Date.now());
    if (stub.mode === "hang") {
      hanging.add(res);
      return;
    }
    if (stub.mode === "fail") {
      res.writeHead(500, { "content-type": "text/plain" }).end("upstream trouble");
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(stub.document()));
  });
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  stub.url = `http://127.0.0.1:${server.address().port}`;
  stub.close = () =>
    new Promise((resolve) => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections?.();
      server.close(resolve);
    });
  return stub;
}

/** An Access application token's claims (Cloudflare's documented payload), at `now` seconds. */
export function claims(teamDomain, { now = Math.floor(Date.now() / 1000), ...over } = {}) {
  const base = {
    aud: [AUD],
    email: EMAIL,
    exp: now + 3600,
    iat: now,
    nbf: now,
    iss: teamDomain,
    type: "app",
    identity_nonce: "6ei69kawdKzMIAPF",
    sub: "7335d417-61da-459d-899c-0a01c76a2f94",
    country: "US",
  };
  for (const [k, v] of Object.entries(over)) {
    if (v === undefined) delete base[k];
    else base[k] = v;
  }
  return base;
}

/** An RS256 token signed by `key` (its own kid unless `kid` is given). */
export function mint(key, payload, { kid = key.kid, alg = "RS256" } = {}) {
  return new SignJWT(payload).setProtectedHeader({ alg, kid, typ: "JWT" }).sign(key.privateKey);
}

/** `alg: none`: no signature at all. */
export function mintNone(payload, kid) {
  const token = new UnsecuredJWT(payload).encode();
  // jose writes {"alg":"none"}; Access names a kid, and an attacker would too
  const [, body] = token.split(".");
  const header = Buffer.from(JSON.stringify({ alg: "none", kid, typ: "JWT" })).toString("base64url");
  return `${header}.${body}.`;
}

/** The algorithm-confusion attack: HS256 keyed with the RSA public key's PEM text. */
export function mintHs256WithPublicKey(key, payload) {
  return new SignJWT(payload).setProtectedHeader({ alg: "HS256", kid: key.kid, typ: "JWT" }).sign(new TextEncoder().encode(key.pem));
}

// Run directly, a development stand-in for a team domain (.dev.vars.example):
//   node tests/helpers/access.mjs [--port 8792] [--aud dev-access-aud] [--email you@example.com] [--worker http://127.0.0.1:8787]
// serves the certs document on 127.0.0.1 and prints a token (valid for 24 hours) to send as the
// Cf-Access-Jwt-Assertion header or set as the CF_Authorization cookie, and a curl that sends it
// to the worker (npm start's address unless --worker names another).
if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const arg = (name, fallback) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback;
  };
  const port = Number(arg("port", "8792"));
  const aud = arg("aud", "dev-access-aud");
  const email = arg("email", EMAIL);
  const worker = arg("worker", "http://127.0.0.1:8787").replace(/\/+$/, "");
  const key = await newKey();
  const stub = await startJwksStub([key], { port });
  const team = stub.url;
  const now = Math.floor(Date.now() / 1000);
  const token = await mint(key, { ...claims(team, { now }), aud: [aud], email, exp: now + 86400 });
  process.stdout.write(
    `team domain ${team} (ACCESS_TEAM_DOMAIN), audience ${aud} (ACCESS_AUD)\n` +
      `a token for ${email}, valid 24 hours:\n${token}\n` +
      `curl -H 'Cf-Access-Jwt-Assertion: ${token}' ${worker}/admin/api/whoami\n`,
  );
}
