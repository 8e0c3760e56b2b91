package engine

// Sliding window log (SL.ADD), the exact technique Redis users build from a
// sorted set: the log of the admitted requests (instant and count) inside
// the last window. A request of count units at now is allowed while the
// units logged in (now − window, now] plus count stay within limit; an entry
// logged at t leaves the window at t + window.
//
// State layout (KindSlidingLog):
//
//	Log       the admitted requests, oldest first, instants strictly
//	          increasing, every Count ≥ 1; a request at the instant of the
//	          newest entry is merged into it
//	A         the sum of the Counts in Log (kept so that a call costs time
//	          in proportion to the entries that leave the window, not to
//	          the entries in it)
//	B, C      unused, 0
//	ExpireAt  the newest entry's instant + window, when the log is empty
//
// Entries dated after now are reservations of waiting requests (wait.go):
// they count like the others, so the sum is every unit admitted or waiting.
//
// Memory: every entry holds at least one unit and the units in the log never
// exceed the limit in force when they were admitted, so a key holds at most
// limit entries (the server caps limit; see ErrLogLimit); with waiting
// requests, at most limit units in each window's length of the time from
// now − window to the latest reservation (at most max-wait ahead), and A
// stays within MaxCount. The backing array grows as append grows it and is
// reused as entries leave.
//
// Bound: at most limit units are admitted inside any interval of one
// window's length (any instants t1 ≤ t2 < t1 + window), while the
// parameters stay the same.
//
// Sharing: the returned State's Log may share its backing array with
// st.Log, and an admitted request (count ≥ 1) writes into that array in
// place: it adds to the newest entry, appends into spare capacity, and
// moves the surviving entries to the front when the head has been consumed.
// The caller must therefore treat st as replaced by the returned State (the
// store swaps them under its lock) and deep-copy Log wherever it keeps a
// copy (a snapshot capture). A limited request or a peek (count 0) returns
// st as it is and writes nothing: st.Log's elements are left exactly as
// they were (entries that have left the window are dropped by the next
// admitted request).
func addSlidingLog(st State, req *Request, now int64) (State, Result) {
	return slAdd(st, req, now, now)
}

// slAdd runs req as of at >= now: the reply is that of the request arriving
// at at, and an admitted request is logged at at, while every entry still
// in the window at now stays in the log. With at == now that is SL.ADD
// itself; at > now is a waiting request's reservation (wait.go), which
// must not drop the entries that leave the window between now and at:
// until at they still count against the requests arriving before it.
// Entries dated after now (earlier reservations) count like any other, so
// the sum is every unit admitted or waiting; a reservation that would take
// it beyond MaxCount is refused.
func slAdd(st State, req *Request, now, at int64) (State, Result) {
	limit, w, n := req.Burst, req.Period, req.Quantity
	if !windowRequestValid(req) {
		return st, invalidWindowResult(req)
	}
	var log []LogEntry
	var sum int64
	if st.Kind == KindSlidingLog {
		if st.ExpireAt > now {
			log, sum = st.Log, st.A
		} else {
			log = st.Log[:0] // expired: empty, but its capacity serves again
		}
	}

	// Skip the entries that have left the window (instant <= now - w),
	// without writing: an admitted request reslices them off.
	cutoff := now - w
	k := 0
	for k < len(log) && log[k].At <= cutoff {
		sum -= log[k].Count
		k++
	}
	live := log[k:]
	if len(live) == 0 {
		sum = 0
	} else if sum < 1 || sum > MaxCount {
		sum = slSum(live) // a damaged A: recount rather than trust it
	}

	// inWin counts the units still in the window at at: all of sum when
	// at == now, less the entries that leave in (now, at] otherwise.
	inWin, j := sum, 0
	for j < len(live) && live[j].At <= at-w {
		inWin -= live[j].Count
		j++
	}

	res := Result{Limit: limit, RetryAfter: -1}
	if len(live) > 0 {
		// The key is deleted at its stored expiry even if a longer window
		// now keeps the newest entry in longer.
		res.ResetAfter = min(live[len(live)-1].At+w, st.ExpireAt) - at
	}
	if n > limit-inWin || n > MaxCount-sum {
		// Reservations can book more than limit units ahead of at (they
		// span later windows), and a lowered limit can leave more than it
		// logged: then even a peek is refused until enough units leave.
		res.Limited = true
		res.Remaining = max(limit-inWin, 0)
		if n <= limit {
			res.RetryAfter = min(slAdmitAt(live[j:], inWin+n-limit, w, at), st.ExpireAt) - at
		}
		return st, res
	}
	res.Remaining = limit - inWin - n
	if n == 0 {
		// A peek returns the state as it is (for a missing key, the zero
		// State, which the caller does not store).
		return st, res
	}

	if k > 0 && k >= len(live) {
		// The head is consumed and moving the survivors costs no more than
		// dropping the expired entries did: compact in place so the
		// array's full capacity serves again.
		live = log[:copy(log, live)]
	}
	if last := len(live) - 1; last >= 0 && at <= live[last].At {
		// Same instant as the newest entry (or, should the clock ever step
		// back, or a reservation be dated later, earlier): merge, keeping
		// instants increasing. Counting the units at the later instant
		// keeps them in the window longer, which can only admit less.
		live[last].Count += n
	} else {
		live = append(live, LogEntry{At: at, Count: n})
	}
	sum += n
	expire := live[len(live)-1].At + w
	res.ResetAfter = expire - at
	return State{Kind: KindSlidingLog, ExpireAt: expire, A: sum, Log: live}, res
}

// slAdmitAt returns the instant at which enough of the oldest entries have
// left the window to free need (> 0) units: the instant the entry that
// completes need leaves. If the entries hold fewer than need units (only
// possible with a damaged state), it is the instant the newest one leaves,
// or now for an empty log.
func slAdmitAt(live []LogEntry, need, w, now int64) int64 {
	var freed int64
	for _, e := range live {
		freed += e.Count
		if freed >= need {
			return e.At + w
		}
	}
	if len(live) == 0 {
		return now
	}
	return live[len(live)-1].At + w
}

// slSum returns the sum of the entries' counts.
func slSum(live []LogEntry) int64 {
	var s int64
	for _, e := range live {
		s += e.Count
	}
	return s
}
