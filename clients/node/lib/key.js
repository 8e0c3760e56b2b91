"use strict";
// Client keys: the server key rule (httplimit/key.go) and the key
// functions (by client IP with trusted proxies, by header, by user).
const crypto = require("node:crypto");
const net = require("node:net");
const { InvalidOptionError } = require("./errors");

/** The longest client key stored as it is; longer ones are hashed. */
const MAX_VERBATIM_KEY = 128;

/**
 * hashTag returns the part of a server key that goes between braces: the
 * key itself when it is short (at most 128 bytes of UTF-8), not empty,
 * holds no brace and does not start with '=', or else "=" and the unpadded
 * base64url SHA-256 of the key's UTF-8 bytes. The two forms cannot collide,
 * and the tag never holds a brace, so that every policy's key of one client
 * lands on one hash slot.
 */
function hashTag(key) {
  if (key !== "" && Buffer.byteLength(key) <= MAX_VERBATIM_KEY && key[0] !== "=" && !/[{}]/.test(key)) {
    return key;
  }
  return "=" + crypto.createHash("sha256").update(key, "utf8").digest("base64url");
}

/** serverKey is <prefix><policy>:{<tag>}, the key the server holds. */
function serverKey(prefix, policy, key) {
  return `${prefix}${policy}:{${hashTag(key)}}`;
}

// --- IP addresses, as 4 or 16 bytes -------------------------------------

function parseIPv4(s) {
  const parts = s.split(".");
  if (parts.length !== 4) return null;
  const out = [];
  for (const p of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p) || Number(p) > 255) return null;
    out.push(Number(p));
  }
  return out;
}

function parseIPv6(s) {
  s = s.replace(/%.*$/, ""); // the zone
  if (net.isIPv6(s) === false) return null;
  let tail = [];
  const v4 = s.match(/^(.*:)(\d+\.\d+\.\d+\.\d+)$/);
  if (v4) {
    const b = parseIPv4(v4[2]);
    if (!b) return null;
    tail = [(b[0] << 8) | b[1], (b[2] << 8) | b[3]];
    s = v4[1].endsWith("::") ? v4[1] : v4[1].slice(0, -1);
  }
  const halves = s.split("::");
  const groups = (h) => (h === "" ? [] : h.split(":").map((g) => parseInt(g, 16)));
  let words;
  if (halves.length === 2) {
    const head = groups(halves[0]);
    const rest = groups(halves[1]).concat(tail);
    words = head.concat(new Array(8 - head.length - rest.length).fill(0), rest);
  } else {
    words = groups(halves[0]).concat(tail);
  }
  if (words.length !== 8 || words.some((w) => !(w >= 0 && w <= 0xffff))) return null;
  const out = [];
  for (const w of words) out.push(w >> 8, w & 0xff);
  return out;
}

// unmap turns an IPv4-mapped IPv6 address (::ffff:a.b.c.d) into IPv4.
function unmap(b) {
  if (b.length === 16 && b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff) {
    return b.slice(12);
  }
  return b;
}

/**
 * parseHop parses an address as a socket or X-Forwarded-For gives it:
 * "192.0.2.1", "192.0.2.1:1234", "2001:db8::1", "[2001:db8::1]:1234",
 * without its zone and with IPv4-mapped addresses as IPv4; null if it is
 * none of those.
 */
function parseHop(s) {
  if (typeof s !== "string") return null;
  let b = parseIPv4(s) || parseIPv6(s);
  if (!b) {
    const m = s.match(/^\[([^\]]+)\]:\d+$/) || s.match(/^([^:]+):\d+$/);
    if (m) b = m[0].startsWith("[") ? parseIPv6(m[1]) : parseIPv4(m[1]);
  }
  return b ? unmap(b) : null;
}

function formatIPv6(b) {
  const words = [];
  for (let i = 0; i < 16; i += 2) words.push((b[i] << 8) | b[i + 1]);
  // The longest run of two or more zero words, the first of equals, is "::".
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  const hex = (ws) => ws.map((w) => w.toString(16)).join(":");
  if (best < 0) return hex(words);
  return hex(words.slice(0, best)) + "::" + hex(words.slice(best + bestLen));
}

function formatIP(b) {
  return b.length === 4 ? b.join(".") : formatIPv6(b);
}

function contains(prefix, b) {
  if (prefix.bytes.length !== b.length) return false;
  let bits = prefix.bits;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((prefix.bytes[i] & mask) !== (b[i] & mask)) return false;
  }
  return true;
}

/**
 * parsePrefix parses a CIDR prefix ("10.0.0.0/8", "2001:db8::/32"); an
 * IPv4-mapped prefix is read as IPv4. It throws InvalidOptionError.
 */
function parsePrefix(s) {
  const m = typeof s === "string" ? s.match(/^([^/]+)\/(\d{1,3})$/) : null;
  const raw = m ? parseIPv4(m[1]) || parseIPv6(m[1]) : null;
  let bits = m ? Number(m[2]) : -1;
  if (!raw || bits > raw.length * 8) {
    throw new InvalidOptionError(`cellserver-limit: invalid option: trusted proxy ${JSON.stringify(s)} is not a prefix such as 10.0.0.0/8`);
  }
  const bytes = unmap(raw);
  if (bytes.length === 4 && raw.length === 16) bits = Math.max(bits - 96, 0);
  return { bytes, bits };
}

/**
 * clientIP returns a request's client address as byIP determines it (a
 * string, IPv4-mapped addresses as IPv4), or null when the peer's address
 * is not an IP address. remoteAddress is the connection's peer;
 * forwardedFor the X-Forwarded-For field lines, joined with commas.
 */
function clientIP(remoteAddress, forwardedFor, trusted) {
  let addr = parseHop(remoteAddress);
  if (!addr) return null;
  const isTrusted = (b) => trusted.some((p) => contains(p, b));
  if (!isTrusted(addr) || !forwardedFor) return addr;
  const hops = forwardedFor.split(",");
  for (let j = hops.length - 1; j >= 0; j--) {
    const s = hops[j].trim();
    if (s === "") continue;
    const a = parseHop(s);
    if (!a) return addr;
    if (!isTrusted(a)) return a;
    addr = a;
  }
  return addr;
}

function headerValues(req, lname) {
  const v = req.headers ? req.headers[lname] : undefined;
  if (v === undefined) return undefined;
  return Array.isArray(v) ? v.join(", ") : v;
}

/**
 * byIP keys a request by its client's IP address: "ip:<address>", or
 * "ip:<network>/64" for IPv6, since one host usually holds a whole /64.
 * The client is the connection's peer (req.socket.remoteAddress) unless
 * that peer is in trusted (CIDR strings): then X-Forwarded-For is read from
 * right to left, skipping the trusted hops, and the first untrusted address
 * is the client. With no trusted prefix the header is ignored. Returns
 * null for a peer that is not an IP address (a unix socket).
 */
function byIP(trusted = []) {
  const prefixes = trusted.map(parsePrefix);
  return (req) => {
    const remote = req.socket ? req.socket.remoteAddress : undefined;
    const b = clientIP(remote, prefixes.length ? headerValues(req, "x-forwarded-for") : undefined, prefixes);
    if (!b) return null;
    if (b.length === 16) {
      const net64 = b.slice(0, 8).concat(new Array(8).fill(0));
      return `ip:${formatIPv6(net64)}/64`;
    }
    return `ip:${formatIP(b)}`;
  };
}

/**
 * byHeader keys a request by a header's first value: "<lower-case
 * name>:<value>" (surrounding spaces trimmed); null when absent or empty.
 * Use it only for values the server checks (an API key validated before).
 */
function byHeader(name) {
  const lname = String(name).toLowerCase();
  return (req) => {
    const distinct = req.headersDistinct ? req.headersDistinct[lname] : undefined;
    let v = distinct ? distinct[0] : req.headers ? req.headers[lname] : undefined;
    if (Array.isArray(v)) v = v[0];
    v = typeof v === "string" ? v.trim() : "";
    return v === "" ? null : `${lname}:${v}`;
  };
}

/**
 * byUser keys a request by its authenticated user: "user:<id>". user(req)
 * returns the id (null, undefined or "" for an anonymous request).
 */
function byUser(user) {
  return (req) => {
    const id = user(req);
    return id === null || id === undefined || id === "" ? null : `user:${id}`;
  };
}

/** firstKey returns the key of the first of fns that has one. */
function firstKey(...fns) {
  return (req) => {
    for (const f of fns) {
      const k = f(req);
      if (k !== null && k !== undefined) return k;
    }
    return null;
  };
}

module.exports = { hashTag, serverKey, byIP, byHeader, byUser, firstKey, clientIP, parsePrefix, parseHop, formatIP };
