// In-page verification of one log entry (docs/pages.md): fetch the entry, its inclusion proof and the
// latest checkpoint, then check with WebCrypto alone that the entry's exact bytes are in the tree whose
// root the checkpoint states, and that the checkpoint is signed by the verifier key in the input box.
// Nothing the server says is taken on its word: the leaf hash and the root are recomputed here.
"use strict";
(function () {
  const box = document.getElementById("verifier");
  if (!box || !window.crypto || !crypto.subtle) return;
  const button = document.getElementById("verify-button");
  const out = document.getElementById("verify-result");
  const enc = new TextEncoder();

  function b64(text) {
    const bin = atob(text);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  function cat(...parts) {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) { out.set(p, at); at += p.length; }
    return out;
  }
  function same(a, b) {
    return a.length === b.length && a.every((x, i) => x === b[i]);
  }
  async function sha256(bytes) {
    return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  }
  const leafHash = (leaf) => sha256(cat(new Uint8Array([0]), leaf));
  const nodeHash = (l, r) => sha256(cat(new Uint8Array([1]), l, r));
  function fail(why) { throw new Error(why); }

  // A verifier key: <name>+<8 hex key hash>+<base64(0x01 || 32-byte Ed25519 key)> (docs/merkle.md).
  async function parseKey(text) {
    const m = /^([^+\s]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/]+=*)$/.exec(text.trim());  // base64 may hold "+"
    if (!m) fail("malformed verifier key");
    const parts = m.slice(1);
    const raw = b64(parts[2]);
    if (raw.length !== 33 || raw[0] !== 1) fail("the verifier key is not an Ed25519 key");
    const hash = (await sha256(cat(enc.encode(parts[0]), new Uint8Array([10]), raw))).slice(0, 4);
    if (Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join("") !== parts[1]) {
      fail("the verifier key's hash does not match its key");
    }
    const key = await crypto.subtle.importKey("raw", raw.slice(1), { name: "Ed25519" }, false, ["verify"]);
    return { name: parts[0], hash, key };
  }

  // A C2SP signed note: text, a blank line, signature lines "— <name> <base64(key hash || sig)>".
  async function openNote(note, vkey) {
    const split = note.lastIndexOf("\n\n");
    if (split < 0) fail("the checkpoint is not a signed note");
    const text = enc.encode(note.slice(0, split + 1));
    let good = 0;
    for (const line of note.slice(split + 2).split("\n")) {
      if (line === "") continue;
      const m = /^\u2014 (\S+) (\S+)$/.exec(line);
      if (!m) fail("malformed signature line");
      const sig = b64(m[2]);
      if (m[1] !== vkey.name || sig.length !== 68 || !same(sig.slice(0, 4), vkey.hash)) continue;
      if (!(await crypto.subtle.verify({ name: "Ed25519" }, vkey.key, sig.slice(4), text))) {
        fail("the checkpoint's signature by " + vkey.name + " does not verify");
      }
      good++;
    }
    if (good === 0) fail("the checkpoint carries no signature by " + vkey.name);
    const lines = note.slice(0, split).split("\n");
    if (lines.length < 3 || !/^[1-9][0-9]*$/.test(lines[1])) fail("malformed checkpoint");
    return { origin: lines[0], size: BigInt(lines[1]), root: b64(lines[2]), signer: vkey.name };
  }

  // RFC 9162 section 2.1.3.2: fold the proof from the leaf hash up to the root of a tree of `size`.
  async function rootFromProof(index, size, hash, proof) {
    if (index >= size) fail("index beyond the tree");
    let fn = index, sn = size - 1n, r = hash;
    for (const p of proof) {
      if (p.length !== 32) fail("a proof hash is not 32 bytes");
      if (sn === 0n) fail("the proof is too long");
      if ((fn & 1n) === 1n || fn === sn) {
        r = await nodeHash(p, r);
        while ((fn & 1n) === 0n && fn !== 0n) { fn >>= 1n; sn >>= 1n; }
      } else {
        r = await nodeHash(r, p);
      }
      fn >>= 1n; sn >>= 1n;
    }
    if (sn !== 0n) fail("the proof is too short");
    return r;
  }

  async function getText(url) {
    const r = await fetch(url, { cache: "no-store" });
    if (!r.ok) fail(url + " answered " + r.status);
    return r.text();
  }

  async function verify() {
    const index = BigInt(box.dataset.index);
    const vkey = await parseKey(document.getElementById("vkey").value);
    const cp = await openNote(await getText("/v1/log/checkpoint"), vkey);
    const page = JSON.parse(await getText(`/v1/log/entries?start=${index}&end=${index + 1n}`));
    const entry = (page.entries || []).find((e) => BigInt(e.index) === index);
    if (!entry) fail("the server did not return entry " + index);
    const proof = JSON.parse(await getText(`/v1/log/proof/inclusion?index=${index}&size=${cp.size}`));
    const root = await rootFromProof(index, cp.size, await leafHash(b64(entry.leaf)), proof.proof.map(b64));
    if (!same(root, cp.root)) fail("the entry and its proof do not lead to the signed root");
    return cp;
  }

  button.hidden = false;
  button.addEventListener("click", async () => {
    out.textContent = "checking…";
    out.dataset.outcome = "running";
    try {
      const cp = await verify();
      out.textContent = `Verified: entry ${box.dataset.index} is in the tree of size ${cp.size} ` +
        `signed by ${cp.signer}.`;
      out.dataset.outcome = "verified";
      out.className = "ok";
    } catch (e) {
      out.textContent = "Verification failed: " + e.message;
      out.dataset.outcome = "failed";
      out.className = "bad";
    }
  });
})();
