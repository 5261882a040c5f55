// The storh web page. Plain JavaScript with no build step and no library,
// so that the page is exactly these three embedded files and the Content
// Security Policy can forbid everything else.
//
// Every value from the store reaches the page through textContent, never
// as markup. Records are shown from the response text itself, not from
// JSON.parse, because a JavaScript number cannot hold every int64: a
// record holding 9007199254740993 must show that, not ...992.
"use strict";

(() => {
  // ---------------------------------------------------------------------
  // ID tools. They are pure functions of their inputs (plus the page's
  // randomness and clock), exported as window.storhIDs so that the tests
  // compare them with the Go packages storh/objectid and storh/uuidv7.
  // ---------------------------------------------------------------------

  const utf8 = new TextEncoder();

  function randomBytes(n) {
    const b = new Uint8Array(n);
    crypto.getRandomValues(b);
    return b;
  }

  function hexOf(n, width) {
    return n.toString(16).padStart(width, "0");
  }

  function hexValue(c) {
    if (c >= 0x30 && c <= 0x39) return c - 0x30;
    if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
    if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
    return -1;
  }

  // quote cuts an input in an error message as the Go packages do, so a
  // pasted document does not fill the page.
  function quote(s, limit) {
    return s.length > limit ? JSON.stringify(s.slice(0, limit)) + "..." : JSON.stringify(s);
  }

  function checkBatch(pkg, n) {
    if (!Number.isInteger(n) || n < 1 || n > 100) {
      throw new RangeError(pkg + ": batch size out of range: n=" + n + ", want 1..100");
    }
  }

  // formatUTC writes a time as "2012-10-17 21:13:27 UTC", with the
  // milliseconds when asked (UUIDv7 has them, ObjectID does not).
  function formatUTC(ms, withMs) {
    const iso = new Date(ms).toISOString(); // 2012-10-17T21:13:27.000Z
    const cut = withMs ? iso.length - 1 : iso.length - 5;
    return iso.slice(0, cut).replace("T", " ") + " UTC";
  }

  // ObjectID, as storh/objectid: 4 bytes of big-endian unsigned seconds,
  // 5 random bytes drawn once per generator, a 3-byte counter that starts
  // at a random value and wraps from 16777215 to 0.
  const MAX_COUNTER = 0xffffff;

  function parseObjectID(s) {
    const b = utf8.encode(s);
    if (b.length !== 24) {
      throw new Error("objectid: invalid ObjectID " + quote(s, 32) + ": length " + b.length + ", want 24 hex characters");
    }
    for (let i = 0; i < 24; i++) {
      if (hexValue(b[i]) < 0) {
        throw new Error("objectid: invalid ObjectID " + quote(s, 32) + ": invalid character " +
          JSON.stringify(s[i]) + " at offset " + i + ", want 0-9, a-f or A-F");
      }
    }
    const hex = s.toLowerCase();
    const seconds = parseInt(hex.slice(0, 8), 16); // unsigned: up to 2106
    return {
      hex,
      seconds,
      random: hex.slice(8, 18),
      counter: parseInt(hex.slice(18), 16),
      timeMs: seconds * 1000,
    };
  }

  // newObjectIDGenerator makes a generator. opts.now gives Unix ms
  // (default Date.now), opts.random the 40-bit value as 10 hex digits and
  // opts.counterStart the first counter; both are drawn from
  // crypto.getRandomValues when absent, once, as a process does.
  function newObjectIDGenerator(opts) {
    opts = opts || {};
    const now = opts.now || Date.now;
    let random = opts.random;
    if (random === undefined) {
      random = Array.from(randomBytes(5), (x) => hexOf(x, 2)).join("");
    }
    if (!/^[0-9a-f]{10}$/.test(random)) throw new RangeError("objectid: the random value is 10 lowercase hex digits");
    let counter = opts.counterStart;
    if (counter === undefined) {
      const c = randomBytes(3);
      counter = (c[0] << 16) | (c[1] << 8) | c[2];
    }
    if (!Number.isInteger(counter) || counter < 0 || counter > MAX_COUNTER) {
      throw new RangeError("objectid: the counter start is in 0..16777215");
    }
    return {
      random,
      // generate returns n ids of one clock reading with consecutive
      // counters, as objectid.NewBatch does.
      generate(n) {
        checkBatch("objectid", n);
        // uint32(t.Unix()): floor to the second, then wrap modulo 2^32
        // like the Go package and the MongoDB drivers.
        const secs = hexOf(Math.floor(now() / 1000) >>> 0, 8);
        const out = [];
        for (let i = 0; i < n; i++) {
          out.push(secs + random + hexOf(counter, 6));
          counter = (counter + 1) & MAX_COUNTER;
        }
        return out;
      },
    };
  }

  // UUIDv7, as storh/uuidv7: RFC 9562 layout, 48-bit ms ‖ 7 ‖ rand_a(12)
  // ‖ 10 ‖ rand_b(62), monotonic by section 6.2 method 2.
  const MAX_TS = 2 ** 48 - 1;
  const RAND_A_MASK = 0xfff;
  const FRESH_A_MASK = RAND_A_MASK >> 1; // headroom, as the Go package
  const RAND_B_MASK = (1n << 62n) - 1n;
  const DASHES = [8, 13, 18, 23];

  function clampMs(ms) {
    return Math.min(Math.max(ms, 0), MAX_TS);
  }

  // checkUUIDv7 returns null for a UUIDv7 in canonical form, or the first
  // problem with the offset and reason uuidv7.Parse gives (its
  // ParseError): length, then layout and digits left to right, then
  // version and variant. Offsets count bytes of UTF-8, as Go's do.
  function checkUUIDv7(s) {
    const b = utf8.encode(s);
    if (b.length !== 36) return { offset: b.length, reason: "length" };
    for (let i = 0; i < 36; i++) {
      if (DASHES.includes(i)) {
        if (b[i] !== 0x2d) return { offset: i, reason: "dash" };
      } else if (hexValue(b[i]) < 0) {
        return { offset: i, reason: "hex" };
      }
    }
    if (b[14] !== 0x37) return { offset: 14, reason: "version" };
    if (!"89abAB".includes(s[19])) return { offset: 19, reason: "variant" };
    return null;
  }

  function uuidMessage(s, p) {
    const b = utf8.encode(s);
    const at = () => {
      if (p.offset >= b.length) return "end of input";
      const c = b[p.offset];
      return c < 0x80 ? "'" + String.fromCharCode(c) + "'" : "byte 0x" + c.toString(16);
    };
    const head = "uuidv7: invalid UUIDv7 " + quote(s, 64) + ": ";
    switch (p.reason) {
      case "length": return head + "length " + p.offset + ", want 36 (canonical 8-4-4-4-12 form without braces, prefix or whitespace)";
      case "dash": return head + "want '-' at offset " + p.offset + ", found " + at();
      case "hex": return head + "non-hex character " + at() + " at offset " + p.offset;
      case "version": return head + "version " + at() + " at offset 14, want '7'";
      default: return head + "variant " + at() + " at offset 19, want one of 8, 9, a, b (RFC 9562 variant)";
    }
  }

  function validateUUIDv7(s) {
    const p = checkUUIDv7(s);
    return p && { offset: p.offset, reason: p.reason, message: uuidMessage(s, p) };
  }

  function uuidTimestampMs(s) {
    const p = checkUUIDv7(s);
    if (p) throw new Error(uuidMessage(s, p));
    // 48 bits fit a double exactly (2^53).
    return parseInt(s.slice(0, 8) + s.slice(9, 13), 16);
  }

  function encodeUUID(ms, a, b) {
    const ts = hexOf(ms, 12);
    const tail = ((1n << 63n) | b).toString(16);
    return ts.slice(0, 8) + "-" + ts.slice(8) + "-" + hexOf(0x7000 | a, 4) + "-" + tail.slice(0, 4) + "-" + tail.slice(4);
  }

  function checkMs(ms) {
    if (!Number.isInteger(ms)) throw new RangeError("uuidv7: the time is a whole number of milliseconds, got " + ms);
  }

  // The smallest and largest UUIDv7 of a millisecond, with ms clamped to
  // [0, 2^48-1] as uuidv7.MinForTimestampMs and MaxForTimestampMs do.
  function minForTimestampMs(ms) {
    checkMs(ms);
    return encodeUUID(clampMs(ms), 0, 0n);
  }

  function maxForTimestampMs(ms) {
    checkMs(ms);
    return encodeUUID(clampMs(ms), RAND_A_MASK, RAND_B_MASK);
  }

  // newUUIDv7Generator mirrors uuidv7.Generator's New and NewBatch: on a
  // new millisecond the 74 bits rand_a ‖ rand_b are drawn fresh from 10
  // random bytes (2 for rand_a with its top bit cleared, 8 for rand_b);
  // within the same millisecond, or when the clock goes back, the 74 bits
  // count up by one and the larger millisecond is kept; when they run out,
  // the next millisecond is borrowed. opts.now gives Unix ms (default
  // Date.now); opts.random(n) gives n random bytes (default
  // crypto.getRandomValues) and is read 10 bytes at a time, in order, as
  // the Go generator reads its source.
  function newUUIDv7Generator(opts) {
    opts = opts || {};
    const now = opts.now || Date.now;
    const rand = opts.random || randomBytes;
    let started = false;
    let lastMs = 0;
    let a = 0;
    let b = 0n;

    function fresh() {
      const r = rand(10);
      let v = 0n;
      for (let i = 2; i < 10; i++) v = (v << 8n) | BigInt(r[i]);
      // Draw before the state changes, as the Go code does, so a failing
      // source leaves the generator as it was.
      a = ((r[0] << 8) | r[1]) & FRESH_A_MASK;
      b = v & RAND_B_MASK;
    }

    function inc() {
      if (b < RAND_B_MASK) {
        b++;
        return true;
      }
      if (a < RAND_A_MASK) {
        a++;
        b = 0n;
        return true;
      }
      return false;
    }

    function next(ms) {
      if (!started || ms > lastMs) {
        fresh();
        started = true;
        lastMs = ms;
      } else if (!inc()) {
        if (lastMs >= MAX_TS) throw new Error("uuidv7: generator exhausted: no millisecond after MaxTimestampMs");
        fresh();
        lastMs++;
      }
      return encodeUUID(lastMs, a, b);
    }

    return {
      // generate returns n increasing ids of one clock reading, as
      // Generator.NewBatch does; generate(1) is Generator.New.
      generate(n) {
        checkBatch("uuidv7", n);
        const ms = clampMs(Math.floor(now()));
        const out = [];
        for (let i = 0; i < n; i++) out.push(next(ms));
        return out;
      },
    };
  }

  // One generator of each per page load: the ObjectID random value is
  // drawn once, and UUIDv7s stay monotonic across clicks.
  const pageObjectIDs = newObjectIDGenerator();
  const pageUUIDv7s = newUUIDv7Generator();

  const storhIDs = Object.freeze({
    formatUTC,
    objectid: Object.freeze({
      parse: parseObjectID,
      isValid(s) {
        try {
          parseObjectID(s);
          return true;
        } catch {
          return false;
        }
      },
      timestampMs: (s) => parseObjectID(s).timeMs,
      generate: (n) => pageObjectIDs.generate(n),
      random: () => pageObjectIDs.random,
      newGenerator: newObjectIDGenerator,
    }),
    uuidv7: Object.freeze({
      MAX_TIMESTAMP_MS: MAX_TS,
      validate: validateUUIDv7,
      isValid: (s) => checkUUIDv7(s) === null,
      timestampMs: uuidTimestampMs,
      minForTimestampMs,
      maxForTimestampMs,
      generate: (n) => pageUUIDv7s.generate(n),
      newGenerator: newUUIDv7Generator,
    }),
  });
  window.storhIDs = storhIDs;

  // ---------------------------------------------------------------------
  // Reading JSON without losing digits: the scanner finds the extent of a
  // value in text that JSON.parse has already accepted, so it may assume
  // the text is well formed.
  // ---------------------------------------------------------------------

  function skipSpace(s, i) {
    while (i < s.length && (s[i] === " " || s[i] === "\n" || s[i] === "\r" || s[i] === "\t")) i++;
    return i;
  }

  // skipValue returns the index just after the JSON value that starts at i.
  function skipValue(s, i) {
    const c = s[i];
    if (c === '"') {
      for (i++; i < s.length && s[i] !== '"'; i++) {
        if (s[i] === "\\") i++;
      }
      return i + 1;
    }
    if (c === "{" || c === "[") {
      let depth = 0;
      for (; i < s.length; i++) {
        const d = s[i];
        if (d === '"') {
          i = skipValue(s, i) - 1;
        } else if (d === "{" || d === "[") {
          depth++;
        } else if (d === "}" || d === "]") {
          depth--;
          if (depth === 0) return i + 1;
        }
      }
      return s.length;
    }
    while (i < s.length && !",]} \t\r\n".includes(s[i])) i++;
    return i;
  }

  // rawMembers returns the raw text of each member of a JSON object.
  function rawMembers(s) {
    const out = new Map();
    let i = skipSpace(s, 0) + 1; // past "{"
    for (;;) {
      i = skipSpace(s, i);
      if (i >= s.length || s[i] === "}") return out;
      const keyEnd = skipValue(s, i);
      const key = JSON.parse(s.slice(i, keyEnd));
      i = skipSpace(s, skipSpace(s, keyEnd) + 1); // past ":"
      const end = skipValue(s, i);
      out.set(key, s.slice(i, end));
      i = skipSpace(s, end);
      if (s[i] === ",") i++;
    }
  }

  // rawItems returns the raw text of each element of a JSON array.
  function rawItems(s) {
    const out = [];
    let i = skipSpace(s, 0) + 1; // past "["
    for (;;) {
      i = skipSpace(s, i);
      if (i >= s.length || s[i] === "]") return out;
      const end = skipValue(s, i);
      out.push(s.slice(i, end));
      i = skipSpace(s, end);
      if (s[i] === ",") i++;
    }
  }

  // pretty indents JSON text by two spaces, keeping every literal as sent.
  function pretty(s) {
    let out = "";
    let depth = 0;
    const nl = () => "\n" + "  ".repeat(depth);
    for (let i = 0; i < s.length;) {
      const c = s[i];
      if (c === '"') {
        const end = skipValue(s, i);
        out += s.slice(i, end);
        i = end;
      } else if (c === " " || c === "\n" || c === "\r" || c === "\t") {
        i++;
      } else if (c === "{" || c === "[") {
        const j = skipSpace(s, i + 1);
        if (s[j] === (c === "{" ? "}" : "]")) {
          out += c + s[j];
          i = j + 1;
        } else {
          depth++;
          out += c + nl();
          i++;
        }
      } else if (c === "}" || c === "]") {
        depth--;
        out += nl() + c;
        i++;
      } else if (c === ",") {
        out += "," + nl();
        i++;
      } else if (c === ":") {
        out += ": ";
        i++;
      } else {
        out += c;
        i++;
      }
    }
    return out;
  }

  // ---------------------------------------------------------------------
  // The API. URLs are relative ("api/…"), so the page works wherever it is
  // mounted as long as the API is beside it.
  // ---------------------------------------------------------------------

  const TOKEN_KEY = "storh.token";
  const $ = (id) => document.getElementById(id);

  class APIError extends Error {
    constructor(status, kind, message) {
      super(message);
      this.status = status;
      this.kind = kind;
    }
  }

  function token() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || "";
    } catch {
      return ""; // storage disabled: the page works without a token
    }
  }

  function authHeaders(extra) {
    const h = Object.assign({}, extra);
    const t = token();
    if (t) h.Authorization = "Bearer " + t;
    return h;
  }

  function errorOf(status, statusText, text) {
    try {
      const j = JSON.parse(text);
      if (j && j.error && typeof j.error.message === "string") {
        let msg = j.error.message;
        if (status === 401) msg += " — enter the token above.";
        return new APIError(status, j.error.kind, msg);
      }
    } catch {
      // not the API's JSON: a proxy's or server's own page
    }
    return new APIError(status, "http", "HTTP " + status + " " + statusText);
  }

  // api GETs path?params and returns the response text, or throws an
  // APIError with the API's message.
  async function api(path, params) {
    const qs = params && params.toString();
    let res;
    try {
      res = await fetch(qs ? path + "?" + qs : path, {
        headers: authHeaders({ Accept: "application/json" }),
        cache: "no-store",
        credentials: "same-origin",
      });
    } catch (e) {
      throw new APIError(0, "network", "the server cannot be reached: " + e.message);
    }
    const text = await res.text();
    if (!res.ok) throw errorOf(res.status, res.statusText, text);
    return text;
  }

  const enc = encodeURIComponent;
  const collectionPath = (name) => "api/collections/" + enc(name);

  // absent tells a route the server does not have (an older handler) from
  // a collection or record that does not exist.
  const absent = (e) => e instanceof APIError && e.status === 404 && /no endpoint/.test(e.message);

  // ---------------------------------------------------------------------
  // Small DOM helpers.
  // ---------------------------------------------------------------------

  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (k === "dataset") Object.assign(e.dataset, v);
        else if (k === "class") e.className = v;
        else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
        else e[k] = v;
      }
    }
    for (const c of children) e.append(c);
    return e;
  }

  function showError(id, err) {
    const p = $(id);
    if (!err) {
      p.hidden = true;
      p.textContent = "";
      return;
    }
    p.textContent = err.message || String(err);
    p.hidden = false;
  }

  function status(text) {
    $("status").textContent = text;
  }

  // apiTime writes the API's "2024-05-01T12:00:00.000Z" as the page shows
  // times.
  function apiTime(s) {
    return s ? s.replace("T", " ").replace(/Z$/, " UTC") : "";
  }

  function busy(button, on) {
    button.disabled = on;
    button.setAttribute("aria-busy", on ? "true" : "false");
  }

  // ---------------------------------------------------------------------
  // Collections.
  // ---------------------------------------------------------------------

  const state = {
    collections: new Map(),
    view: null, // the record list's query and cursors
    queues: new Map(),
  };

  async function loadCollections() {
    const button = $("collections-refresh");
    busy(button, true);
    try {
      const text = await api("api/collections");
      const list = JSON.parse(text).collections || [];
      state.collections = new Map(list.map((c) => [c.name, c]));
      const body = $("collections-table").tBodies[0];
      body.replaceChildren(...list.map(collectionRow));
      if (list.length === 0) {
        body.append(el("tr", null, el("td", { colSpan: 5, class: "help" }, "No collections yet.")));
      }
      showError("collections-error", null);
      status(list.length + " collection" + (list.length === 1 ? "" : "s"));
    } catch (e) {
      showError("collections-error", e);
      status("");
    } finally {
      busy(button, false);
    }
  }

  function collectionRow(c) {
    const queue = c.kind === "queue";
    const open = el("button", {
      type: "button",
      class: "link",
      dataset: { collection: c.name, kind: c.kind },
      onclick: () => (queue ? loadQueue(c.name, true) : selectCollection(c.name)),
      title: queue ? "Show this queue's job counts" : "Page through this collection's records",
    }, c.name);
    return el("tr", null,
      el("th", { scope: "row" }, open),
      el("td", null, c.kind),
      el("td", { class: "num" }, String(c.records)),
      el("td", null, apiTime(c.first_time) || "—"),
      el("td", null, apiTime(c.last_time) || "—"));
  }

  function selectCollection(name) {
    stopTail();
    state.view = { collection: name, page: 0 };
    $("records-name").textContent = "in " + name;
    $("tail-name").textContent = "of " + name;
    $("tail-start").disabled = false;
    $("explain").hidden = true;
    $("aggregate-name").textContent = "of " + name;
    $("aggregate-table").hidden = true;
    $("aggregate-plan").hidden = true;
    $("aggregate-info").textContent = "";
    loadSchema(name);
    runQuery();
    $("records-h").scrollIntoView({ block: "start" });
  }

  // loadSchema shows the collection's JSON Schema, if it has one. It is
  // an extra: a server without the endpoint, or a failure, shows none.
  async function loadSchema(name) {
    $("schema").hidden = true;
    let raw = "null";
    try {
      raw = rawMembers(await api(collectionPath(name) + "/schema")).get("schema") || "null";
    } catch (e) {
      return;
    }
    if (!state.view || state.view.collection !== name || raw === "null") return;
    $("schema-json").textContent = pretty(raw);
    $("schema").hidden = false;
  }

  // ---------------------------------------------------------------------
  // Records: the query form, and paging by cursor in both directions.
  // ---------------------------------------------------------------------

  // inputMs reads a datetime-local value as UTC milliseconds. With end,
  // the value covers its whole last unit: "12:00" until 12:00:59.999,
  // "12:00:05" until 12:00:05.999, as a person means an inclusive end.
  function inputMs(value, end) {
    const m = /^(\d{4,})-(\d\d)-(\d\d)[T ](\d\d):(\d\d)(?::(\d\d)(?:\.(\d{1,3}))?)?$/.exec(value.trim());
    if (!m) throw new Error("a time is YYYY-MM-DDTHH:MM[:SS[.mmm]], got " + JSON.stringify(value));
    const d = new Date(0);
    // setUTCFullYear, unlike Date.UTC, does not read years 0–99 as 19xx.
    d.setUTCFullYear(+m[1], +m[2] - 1, +m[3]);
    d.setUTCHours(+m[4], +m[5], +(m[6] || 0), +(m[7] || "0").padEnd(3, "0"));
    let ms = d.getTime();
    if (Number.isNaN(ms)) throw new Error("not a time: " + JSON.stringify(value));
    if (end && m[6] === undefined) ms += 59999;
    else if (end && m[7] === undefined) ms += 999;
    return ms;
  }

  // formParams reads the query form into the parameters every page of the
  // query shares; the cursor and direction are added per request.
  function formParams() {
    const p = new URLSearchParams();
    const limit = $("limit").value.trim();
    if (limit !== "") {
      const n = Number(limit);
      if (!Number.isInteger(n) || n < 1 || n > 1000) throw new Error("Records per page is a whole number from 1 to 1000.");
      p.set("limit", String(n));
    }
    const from = $("from").value;
    const until = $("until").value;
    if (from) p.set("from", String(inputMs(from, false)));
    if (until) p.set("until", String(inputMs(until, true)));
    const q = $("q").value.trim();
    if (q) p.set("q", q);
    const order = $("order").value.trim();
    if (order) p.set("order", order);
    return p;
  }

  function runQuery() {
    const v = state.view;
    if (!v) {
      showError("records-error", new Error("Choose a collection first."));
      return;
    }
    try {
      v.params = formParams();
    } catch (e) {
      showError("records-error", e);
      return;
    }
    v.newest = $("newest").checked;
    // An explain shown belongs to the query before.
    $("explain").hidden = true;
    loadPage("first");
  }

  // parsePage reads a page answer: each record's id and time from JSON,
  // and its raw text for display.
  function parsePage(text) {
    const page = JSON.parse(text); // validates, and gives next
    const raw = rawItems(rawMembers(text).get("records") || "[]");
    const records = page.records.map((r, i) => ({
      id: r.id,
      time: r.time,
      raw: raw[i],
      data: rawMembers(raw[i]).get("data") || "",
    }));
    return { records, next: page.next || "" };
  }

  // loadPage shows the first page of the query, or the next or previous
  // one. The API pages one way, by the last id of a page (next): the next
  // page continues after the last record shown, the previous page reads
  // the other way from the first record shown and is turned round. In
  // newest-first order "after" and "before" swap, as the API reads them in
  // the query's own order.
  async function loadPage(move) {
    const v = state.view;
    const p = new URLSearchParams(v.params);
    let back = false;
    if (move === "next") {
      p.set(v.newest ? "before" : "after", v.lastId);
      if (v.newest) p.set("newest", "1");
    } else if (move === "prev") {
      p.set(v.newest ? "after" : "before", v.firstId);
      if (!v.newest) p.set("newest", "1");
      back = true;
    } else if (v.newest) {
      p.set("newest", "1");
    }
    for (const b of ["prev", "next", "run"]) $(b).disabled = true;
    try {
      const page = parsePage(await api(collectionPath(v.collection) + "/records", p));
      if (back && !page.next) {
        // Back at the start: the page before may be short, and the first
        // page is what the reader expects there.
        return await loadPage("first");
      }
      if (move === "next" && page.records.length === 0) {
        // Records after the cursor went away meanwhile: keep the page.
        v.hasNext = false;
        showError("records-error", new Error("No more records."));
        return;
      }
      if (back) page.records.reverse();
      if (move === "first") {
        v.page = 1;
        v.hasPrev = false;
        v.hasNext = page.next !== "";
      } else if (move === "next") {
        v.page++;
        v.hasPrev = true;
        v.hasNext = page.next !== "";
      } else {
        v.page--;
        v.hasPrev = true;
        v.hasNext = true;
      }
      v.firstId = page.records.length ? page.records[0].id : "";
      v.lastId = page.records.length ? page.records[page.records.length - 1].id : "";
      renderRecords(page.records);
      showError("records-error", null);
    } catch (e) {
      showError("records-error", e);
    } finally {
      $("run").disabled = false;
      $("prev").disabled = !v.hasPrev;
      $("next").disabled = !v.hasNext;
    }
  }

  function preview(raw) {
    return raw.length > 200 ? raw.slice(0, 200) + "…" : raw;
  }

  function idButton(collection, id) {
    return el("button", {
      type: "button",
      class: "link mono",
      dataset: { id },
      onclick: () => loadRecord(collection, id),
      title: "Show this record",
    }, id);
  }

  function renderRecords(records) {
    const v = state.view;
    const body = $("records-table").tBodies[0];
    body.replaceChildren(...records.map((r) => el("tr", null,
      el("td", null, idButton(v.collection, r.id)),
      el("td", { class: "time" }, apiTime(r.time)),
      el("td", { class: "data mono" }, preview(r.data)))));
    if (records.length === 0) {
      body.append(el("tr", null, el("td", { colSpan: 3, class: "help" }, "No records match.")));
    }
    $("page-info").textContent = records.length
      ? "Page " + v.page + " · " + records.length + " record" + (records.length === 1 ? "" : "s")
      : "No records";
  }

  async function explain() {
    const v = state.view;
    if (!v) {
      showError("records-error", new Error("Choose a collection first."));
      return;
    }
    let p;
    try {
      p = formParams();
    } catch (e) {
      showError("records-error", e);
      return;
    }
    if ($("newest").checked) p.set("newest", "1");
    try {
      const text = await api(collectionPath(v.collection) + "/explain", p);
      $("explain-text").textContent = JSON.parse(text).text || "";
      $("explain-json").textContent = pretty(text.trim());
      $("explain").hidden = false;
      showError("records-error", null);
    } catch (e) {
      $("explain").hidden = true;
      showError("records-error", e);
    }
  }

  // ---------------------------------------------------------------------
  // Aggregate: the groups of the aggregate endpoint as a table, a column
  // per group-by path and then one per aggregate. Cells are the answer's
  // raw JSON values (quoted text, {"$date":…} times), so that an integer
  // sum beyond 2^53 shows as the server wrote it.
  // ---------------------------------------------------------------------

  // aggregateParams reads the aggregate form into the endpoint's
  // parameters, and the column names in order.
  function aggregateParams() {
    const p = new URLSearchParams();
    const groups = $("agg-group").value.split(",").map((g) => g.trim()).filter((g) => g !== "");
    for (const g of groups) p.append("group", g);
    const aggs = $("agg-aggs").value.split("\n").map((a) => a.trim()).filter((a) => a !== "");
    if (aggs.length === 0) throw new Error("Give at least one aggregate, such as count:n.");
    const names = [];
    for (const a of aggs) {
      p.append("agg", a);
      // The name is the second part of OP:NAME[:PATH], or a JSON object's.
      let name = a.split(":")[1] || "";
      if (a.startsWith("{")) {
        try {
          name = String(JSON.parse(a).name);
        } catch {
          name = ""; // the server says what is wrong with it
        }
      }
      names.push(name);
    }
    const q = $("agg-q").value.trim();
    if (q) p.set("q", q);
    return { p, groups, names };
  }

  async function runAggregate(explainIt) {
    const v = state.view;
    if (!v) {
      showError("aggregate-error", new Error("Choose a collection first."));
      return;
    }
    let form;
    try {
      form = aggregateParams();
    } catch (e) {
      showError("aggregate-error", e);
      return;
    }
    if (explainIt) form.p.set("explain", "1");
    busy($("agg-run"), true);
    try {
      const text = await api(collectionPath(v.collection) + "/aggregate", form.p);
      if (explainIt) {
        $("aggregate-plan").textContent = JSON.parse(text).text || "";
        $("aggregate-plan").hidden = false;
      } else {
        renderGroups(text, form.groups, form.names);
        $("aggregate-plan").hidden = true;
      }
      showError("aggregate-error", null);
    } catch (e) {
      showError("aggregate-error", absent(e) ? new Error("This server has no aggregate endpoint.") : e);
    } finally {
      busy($("agg-run"), false);
    }
  }

  function renderGroups(text, groups, names) {
    JSON.parse(text); // refuse a body that is not JSON before showing it
    const raw = rawItems(rawMembers(text).get("groups") || "[]");
    const table = $("aggregate-table");
    table.tHead.rows[0].replaceChildren(...groups.map((g) => el("th", { scope: "col" }, g)),
      ...names.map((n) => el("th", { scope: "col", class: "num" }, n)));
    table.tBodies[0].replaceChildren(...raw.map((g) => {
      const m = rawMembers(g);
      const values = rawMembers(m.get("values") || "{}");
      return el("tr", null,
        ...rawItems(m.get("key") || "[]").map((k) => el("td", { class: "mono" }, k)),
        ...names.map((n) => el("td", { class: "num mono" }, values.get(n) || "")));
    }));
    table.hidden = false;
    $("aggregate-info").textContent = raw.length + " group" + (raw.length === 1 ? "" : "s");
  }

  // ---------------------------------------------------------------------
  // Record detail.
  // ---------------------------------------------------------------------

  async function loadRecord(collection, id) {
    try {
      const text = await api(collectionPath(collection) + "/records/" + enc(id));
      JSON.parse(text); // refuse a body that is not JSON before showing it as such
      $("detail-id").textContent = id;
      $("detail-created").textContent = formatUTC(uuidTimestampMs(id), true);
      $("detail-collection").textContent = collection;
      $("detail-json").textContent = pretty(text.trim());
      $("detail-meta").hidden = false;
      $("detail-json").hidden = false;
      $("detail-empty").hidden = true;
      showError("detail-error", null);
    } catch (e) {
      showError("detail-error", e);
    }
    $("detail-h").scrollIntoView({ block: "start" });
    $("detail-json").focus({ preventScroll: true });
  }

  // ---------------------------------------------------------------------
  // Queues.
  // ---------------------------------------------------------------------

  async function loadQueue(name, reveal) {
    try {
      const q = JSON.parse(await api("api/queues/" + enc(name)));
      state.queues.set(name, q);
      showError("queues-error", null);
    } catch (e) {
      showError("queues-error", absent(e) ? new Error("This server has no queue endpoint (api/queues).") : e);
    }
    renderQueues();
    if (reveal) $("queues-h").scrollIntoView({ block: "start" });
  }

  function renderQueues() {
    const rows = [...state.queues.values()].map((q) => el("tr", { dataset: { queue: q.name } },
      el("th", { scope: "row" }, q.name),
      el("td", { class: "num" }, String(q.pending)),
      el("td", { class: "num" }, String(q.claimed)),
      el("td", { class: "num" }, String(q.done)),
      el("td", { class: "num" }, String(q.dead)),
      el("td", null, el("button", { type: "button", onclick: () => loadQueue(q.name, false) }, "Refresh"))));
    $("queues-table").tBodies[0].replaceChildren(...rows);
    $("queues-table").hidden = rows.length === 0;
    $("queues-empty").hidden = rows.length !== 0;
  }

  // ---------------------------------------------------------------------
  // Live tail. An EventSource cannot send an Authorization header, and the
  // API takes the token no other way; so with a token the page reads the
  // same Server-Sent Events with fetch, which can, and reconnects with
  // Last-Event-ID as an EventSource would.
  // ---------------------------------------------------------------------

  const TAIL_KEEP = 500; // entries shown; older ones are dropped
  let tail = null;

  function tailStatus(text) {
    $("tail-status").textContent = text;
  }

  // addTailRecord shows one event of the tail: a record, or, from a
  // collection's change feed, a change ({"seq","op",…}), whose delete
  // has no data and whose id no longer opens a record.
  function addTailRecord(data, collection) {
    let id = "";
    let time = "";
    let op = "";
    let body = data;
    try {
      const r = JSON.parse(data);
      id = r.id;
      time = r.time;
      op = r.op || "";
      body = rawMembers(data).get("data") || (op === "delete" ? "" : data);
    } catch {
      // show what came, as it came
    }
    const list = $("tail-list");
    const deleted = op === "delete";
    list.append(el("li", deleted ? { class: "deleted", dataset: { op, id } } : { dataset: { op } },
      id && !deleted ? idButton(collection, id) : el("span", { class: "mono" }, id),
      el("span", { class: "time" }, " " + apiTime(time) + " "),
      deleted ? el("span", { class: "op" }, "deleted") : el("span", { class: "data mono" }, preview(body))));
    while (list.children.length > TAIL_KEEP) list.firstElementChild.remove();
  }

  function tailError(data) {
    try {
      return JSON.parse(data).error.message;
    } catch {
      return data;
    }
  }

  // startTail follows the collection's change feed when it has one (its
  // puts and deletes, resumed after the last Seq), else its new records.
  async function startTail() {
    const v = state.view;
    if (!v) return;
    stopTail();
    const collection = v.collection;
    $("tail-start").disabled = true;
    $("tail-stop").disabled = false;
    tailStatus("Connecting…");
    const starting = { stop: () => {} };
    tail = starting;
    let feed = false;
    try {
      feed = JSON.parse(await api(collectionPath(collection))).feed_keep > 0;
    } catch {
      // An older server, or a failure: the tail says what is wrong.
    }
    if (tail !== starting) return; // stopped, or another started, meanwhile
    const url = collectionPath(collection) + (feed ? "/changes" : "/tail");
    const live = feed
      ? "Live: the changes of " + collection + " (its change feed: writes and deletes) appear below."
      : "Live: new records of " + collection + " appear below.";
    if (!token()) {
      const es = new EventSource(url);
      tail = { stop: () => es.close() };
      es.onopen = () => tailStatus(live);
      es.onmessage = (e) => addTailRecord(e.data, collection);
      es.addEventListener("error", (e) => {
        if (typeof e.data === "string") {
          // The server's own "error" event; the EventSource reconnects
          // and resumes after the last id it received.
          tailStatus("The server ended the tail: " + tailError(e.data) + " Reconnecting…");
        } else if (es.readyState === EventSource.CLOSED) {
          stopTail("No live tail: the server refused it or has no tail endpoint.");
        } else {
          tailStatus("Connection lost; reconnecting…");
        }
      });
      return;
    }
    const ctrl = new AbortController();
    tail = { stop: () => ctrl.abort() };
    fetchTail(url, collection, live, ctrl.signal).catch((e) => {
      if (!ctrl.signal.aborted) stopTail("The tail stopped: " + e.message);
    });
  }

  const sleep = (ms, signal) => new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    }, { once: true });
  });

  async function fetchTail(url, collection, live, signal) {
    let lastId = "";
    while (!signal.aborted) {
      const headers = authHeaders({ Accept: "text/event-stream" });
      if (lastId) headers["Last-Event-ID"] = lastId;
      let res;
      try {
        res = await fetch(url, { headers, signal, cache: "no-store", credentials: "same-origin" });
      } catch (e) {
        if (signal.aborted) return;
        tailStatus("Connection lost (" + e.message + "); reconnecting…");
        await sleep(3000, signal);
        continue;
      }
      if (!res.ok) {
        const err = errorOf(res.status, res.statusText, await res.text());
        stopTail("No live tail: " + (absent(err) ? "this server has no tail endpoint." : err.message));
        return;
      }
      tailStatus(live);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      let ev = { type: "", data: [] };
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let nl;
          while ((nl = buf.indexOf("\n")) >= 0) {
            const line = buf.slice(0, nl).replace(/\r$/, "");
            buf = buf.slice(nl + 1);
            if (line === "") {
              // A blank line dispatches the event, per the SSE format.
              if (ev.data.length) {
                const data = ev.data.join("\n");
                if (ev.type === "error") tailStatus("The server ended the tail: " + tailError(data) + " Reconnecting…");
                else addTailRecord(data, collection);
              }
              ev = { type: "", data: [] };
              continue;
            }
            if (line.startsWith(":")) continue; // a comment: heartbeat
            const colon = line.indexOf(":");
            const field = colon < 0 ? line : line.slice(0, colon);
            let val = colon < 0 ? "" : line.slice(colon + 1);
            if (val.startsWith(" ")) val = val.slice(1);
            if (field === "data") ev.data.push(val);
            else if (field === "event") ev.type = val;
            else if (field === "id") lastId = val;
          }
        }
      } catch (e) {
        if (signal.aborted) return;
        tailStatus("Connection lost (" + e.message + "); reconnecting…");
      }
      await sleep(1000, signal);
    }
  }

  // stopTail ends the tail, if one runs, and says why.
  function stopTail(why) {
    if (tail) {
      tail.stop();
      tail = null;
      tailStatus(why || "Stopped.");
    }
    $("tail-start").disabled = !state.view;
    $("tail-stop").disabled = true;
  }

  // ---------------------------------------------------------------------
  // ID tool forms.
  // ---------------------------------------------------------------------

  function countOf(id) {
    const n = Number($(id).value);
    if (!Number.isInteger(n) || n < 1 || n > 100) throw new RangeError("How many: a whole number from 1 to 100.");
    return n;
  }

  async function copy(textarea, label) {
    const text = textarea.value;
    if (!text) return;
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // The async clipboard needs a secure context (https or localhost);
      // over plain http to another host, copy the selection instead.
      textarea.select();
      document.execCommand("copy");
    }
    status(label + " copied.");
  }

  function showResult(id, lines, error) {
    const out = $(id);
    out.classList.toggle("bad", !!error);
    out.replaceChildren(...lines.map((l) => el("span", { class: "line" }, l)));
  }

  // timeInputMs reads a time for the min/max tool: Unix ms, RFC 3339 with
  // its zone, or a date and time without one, read as UTC.
  function timeInputMs(s) {
    s = s.trim();
    if (/^-?\d+$/.test(s)) return Number(s);
    if (/([zZ]|[+-]\d\d:?\d\d)$/.test(s)) {
      const ms = Date.parse(s);
      if (Number.isNaN(ms)) throw new Error("not a time: " + JSON.stringify(s));
      return ms;
    }
    return inputMs(s, false);
  }

  function wireIDTools() {
    $("oid-gen-form").addEventListener("submit", (e) => {
      e.preventDefault();
      try {
        $("oid-out").value = storhIDs.objectid.generate(countOf("oid-count")).join("\n");
      } catch (err) {
        $("oid-out").value = "";
        status(err.message);
      }
    });
    $("oid-copy").addEventListener("click", () => copy($("oid-out"), "ObjectIDs"));
    $("oid-decode-form").addEventListener("submit", (e) => {
      e.preventDefault();
      try {
        const p = parseObjectID($("oid-in").value.trim());
        showResult("oid-result", [
          formatUTC(p.timeMs, false),
          "seconds " + p.seconds + " · random " + p.random + " · counter " + p.counter + " (0x" + hexOf(p.counter, 6) + ")",
        ]);
      } catch (err) {
        showResult("oid-result", [err.message], true);
      }
    });

    $("u7-gen-form").addEventListener("submit", (e) => {
      e.preventDefault();
      try {
        $("u7-out").value = storhIDs.uuidv7.generate(countOf("u7-count")).join("\n");
      } catch (err) {
        $("u7-out").value = "";
        status(err.message);
      }
    });
    $("u7-copy").addEventListener("click", () => copy($("u7-out"), "UUIDv7s"));
    $("u7-decode-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const s = $("u7-in").value.trim();
      const bad = validateUUIDv7(s);
      if (bad) {
        showResult("u7-result", ["Not a UUIDv7 (" + bad.reason + "): " + bad.message], true);
        return;
      }
      const ms = uuidTimestampMs(s);
      showResult("u7-result", ["Valid UUIDv7 (version 7, variant 10)", formatUTC(ms, true), ms + " ms since the Unix epoch"]);
    });
    $("u7-range-form").addEventListener("submit", (e) => {
      e.preventDefault();
      try {
        const ms = timeInputMs($("u7-time").value);
        $("u7-min").textContent = minForTimestampMs(ms);
        $("u7-max").textContent = maxForTimestampMs(ms);
        showError("u7-range-error", null);
      } catch (err) {
        $("u7-min").textContent = "";
        $("u7-max").textContent = "";
        showError("u7-range-error", err);
      }
    });
  }

  // ---------------------------------------------------------------------
  // Start.
  // ---------------------------------------------------------------------

  function init() {
    $("token").value = token();
    $("token-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const t = $("token").value.trim();
      try {
        if (t) sessionStorage.setItem(TOKEN_KEY, t);
        else sessionStorage.removeItem(TOKEN_KEY);
      } catch {
        status("This browser keeps no session storage: the token cannot be used.");
        return;
      }
      stopTail();
      loadCollections();
    });
    $("token-forget").addEventListener("click", () => {
      try {
        sessionStorage.removeItem(TOKEN_KEY);
      } catch {
        // nothing stored
      }
      $("token").value = "";
      stopTail();
      status("Token forgotten.");
    });
    $("collections-refresh").addEventListener("click", loadCollections);
    $("query-form").addEventListener("submit", (e) => {
      e.preventDefault();
      runQuery();
    });
    $("explain-run").addEventListener("click", explain);
    $("aggregate-form").addEventListener("submit", (e) => {
      e.preventDefault();
      runAggregate(false);
    });
    $("agg-explain").addEventListener("click", () => runAggregate(true));
    $("query-clear").addEventListener("click", () => {
      for (const id of ["q", "order", "from", "until"]) $(id).value = "";
      $("newest").checked = false;
      if (state.view) runQuery();
    });
    $("next").addEventListener("click", () => loadPage("next"));
    $("prev").addEventListener("click", () => loadPage("prev"));
    $("tail-start").addEventListener("click", startTail);
    $("tail-stop").addEventListener("click", () => stopTail());
    $("tail-clear").addEventListener("click", () => $("tail-list").replaceChildren());
    $("u7-time").value = new Date().toISOString();
    wireIDTools();
    loadCollections();
  }

  init();
})();
