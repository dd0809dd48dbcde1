// Commands as a user types them: through bash in the repository, `npm start` in its own process
// group, a long-running command waited on until it prints what it prints when ready, and SQL on
// a local D1 as `wrangler d1 execute --local` runs it (set-up only).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { ROOT, eventually } from "./worker.mjs";

const QUIET = { CI: "true", WRANGLER_SEND_METRICS: "false" };
const shellQuote = (s) => `'${String(s).replaceAll("'", "'\\''")}'`;

/** `bash -c command` in the repository: `{code, stdout, stderr, json}`; a non-zero exit resolves. */
export function sh(command, { env = {}, cwd = ROOT, timeoutMs = 180000 } = {}) {
  const child = spawn("bash", ["-c", command], { cwd, env: { ...process.env, ...QUIET, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  return finished(child, `\`${command}\``, timeoutMs);
}

/**
 * A child process run to its end: `{code, stdout, stderr, json}` (`json` its stdout parsed, if it
 * is JSON); a non-zero exit resolves, a run longer than `timeoutMs` is killed and rejects.
 */
export function finished(child, what, timeoutMs) {
  return new Promise((resolve, reject) => {
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${what} ran longer than ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      let json;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

/** Kills a process group: SIGTERM, up to 10 s for it to exit, then SIGKILL (twice: workerd may outlive its parent by a moment). */
async function stopGroup(child, state, exited) {
  if (state.exited) return;
  try {
    process.kill(-child.pid, "SIGTERM");
  } catch {
    return;
  }
  const gone = await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 10000))]);
  for (const wait of gone ? [500] : [0, 500]) {
    await new Promise((r) => setTimeout(r, wait));
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      /* nothing left */
    }
  }
}

/** Spawns `command` through bash in its own process group, collecting its output (and its JSON log lines). */
function group(command, env) {
  const child = spawn("bash", ["-c", command], { cwd: ROOT, detached: true, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  const state = { out: "", exited: null, logs: [] };
  const echo = process.env.PAYMOS_TEST_LOGS === "1";
  for (const stream of [child.stdout, child.stderr]) {
    let buf = "";
    stream.on("data", (chunk) => {
      state.out += chunk;
      if (echo) process.stderr.write(chunk);
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        try {
          const v = JSON.parse(line);
          if (v && typeof v === "object") state.logs.push(v);
        } catch {
          /* not a log line of ours */
        }
      }
    });
  }
  child.on("exit", (code, signal) => (state.exited = { code, signal }));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  return {
    state,
    /** Polls `fn`, failing at once (with the output) if the command has exited. */
    until(what, fn, ms = 30000, every = 200) {
      return eventually(
        what,
        async () => {
          if (state.exited) throw new Error(`\`${command}\` exited (${JSON.stringify(state.exited)}) before ${what}:\n${state.out.slice(-4000)}`);
          return fn();
        },
        ms,
        every,
      );
    },
    /** Stops the command and everything it started. */
    stop: () => stopGroup(child, state, exited),
  };
}

/** A long-running command; resolves once its output matches `ready`, with that match. */
export async function background(command, ready, { env = {}, ms = 20000 } = {}) {
  const g = group(`exec ${command}`, { ...QUIET, ...env });
  const match = await g.until(`\`${command}\` to print ${ready}`, () => g.state.out.match(ready), ms, 50);
  return { ...g, match };
}

/** `npm start -- args` as the README types it, with its PORT and STATE_DIR. */
export function npmStart(port, stateDir, args = []) {
  return group(`exec npm start -- ${args.map(shellQuote).join(" ")}`, { PORT: String(port), STATE_DIR: stateDir });
}

/** Runs SQL against the local D1 persisted under `dir`, as `wrangler d1 execute --local` does. */
export async function d1(dir, sql) {
  const wrangler = path.join(ROOT, "node_modules/.bin/wrangler");
  const r = await sh(`'${wrangler}' d1 execute DB --local --persist-to '${dir}' --json --command ${shellQuote(sql)}`);
  if (r.code !== 0) throw new Error(`wrangler d1 execute failed: ${r.stdout}${r.stderr}`);
  return JSON.parse(r.stdout)[0].results;
}

/** A value of a dotenv file (.dev.vars by default, made by scripts/setup.sh from .dev.vars.example). */
export async function devVar(name, file = ".dev.vars") {
  const text = await readFile(path.join(ROOT, file), "utf8");
  return text.match(new RegExp(`^${name}="?([^"\\n]*)"?\\s*$`, "m"))?.[1];
}

/** The commands of a Markdown file's ```sh blocks (indented ones too), continuation lines joined, comments dropped. */
export async function docCommands(rel) {
  const text = await readFile(path.join(ROOT, rel), "utf8");
  const out = [];
  for (const [, body] of text.matchAll(/^[ \t]*```sh\n([\s\S]*?)^[ \t]*```/gm)) {
    for (const line of body.replace(/\\\n\s*/g, "").split("\n")) {
      const c = line.trim();
      if (c && !c.startsWith("#")) out.push(c);
    }
  }
  return out;
}

/** The one command of `commands` matching `re` (fails when the docs no longer have exactly one). */
export function one(commands, re) {
  const found = commands.filter((c) => re.test(c));
  assert.equal(found.length, 1, `expected one command matching ${re}, found ${JSON.stringify(found)}`);
  return found[0];
}
