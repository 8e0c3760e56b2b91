"use strict";
// The circuit breaker, as httplimit/breaker.go: closed, it lets every
// decision through and counts consecutive failures; after `failures` of
// them in a row, or at once when the server refused the connection, it
// opens and refuses every decision without a round trip for coolDownMs;
// then one decision goes through as a probe (the others are still
// refused), whose success closes it and whose failure opens it again.

/** How many consecutive failed decisions open the breaker. */
const DEFAULT_BREAKER_FAILURES = 5;
/** How long an open breaker refuses every decision before a probe, in ms. */
const DEFAULT_BREAKER_COOL_DOWN_MS = 1000;

/** What a decision the breaker let through says of the server. */
const Outcome = Object.freeze({
  ANSWERED: "answered", // a decision, an error reply, a reply of the wrong shape: it is up
  FAILED: "failed", // unreachable, or no answer in time
  REFUSED: "refused", // the server's host refused the connection: it is down
});

const CLOSED = 0;
const OPEN = 1;
const PROBING = 2;

class Breaker {
  /**
   * @param {number} failures consecutive failures that open it, >= 1
   * @param {number} coolDownMs time open before a probe, > 0
   * @param {() => number} now a monotonic clock in ms
   */
  constructor(failures, coolDownMs, now) {
    this.failures = failures;
    this.coolDownMs = coolDownMs;
    this.now = now;
    this.state = CLOSED;
    this.streak = 0;
    this.openedAt = 0;
  }

  /**
   * allow returns null when a decision may not go to the server now, else
   * {probe}: probe is true for the one decision a half-open breaker lets
   * through. Its outcome must be reported with done.
   */
  allow() {
    switch (this.state) {
      case CLOSED:
        return { probe: false };
      case OPEN:
        if (this.now() - this.openedAt < this.coolDownMs) return null;
        this.state = PROBING;
        return { probe: true };
    }
    return null; // a probe is in flight
  }

  /** done records the outcome of a decision allow let through. */
  done(ticket, outcome) {
    if (ticket.probe) {
      if (outcome === Outcome.ANSWERED) {
        this.state = CLOSED;
        this.streak = 0;
      } else {
        this.state = OPEN;
        this.openedAt = this.now();
      }
      return;
    }
    if (this.state !== CLOSED) return; // started before the breaker opened
    if (outcome === Outcome.ANSWERED) {
      this.streak = 0;
      return;
    }
    this.streak++;
    if (outcome === Outcome.REFUSED || this.streak >= this.failures) {
      this.state = OPEN;
      this.openedAt = this.now();
      this.streak = 0;
    }
  }

  /** isOpen reports whether decisions are refused now (open or probing). */
  isOpen() {
    return this.state !== CLOSED;
  }
}

module.exports = { Breaker, Outcome, DEFAULT_BREAKER_FAILURES, DEFAULT_BREAKER_COOL_DOWN_MS };
