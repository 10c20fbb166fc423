package hybrid

import (
	"context"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/window"
)

// close is Close for both strategies.
func (t *table[E]) close(ctx context.Context) error {
	var err error
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		t.b.Close()
		close(t.stop)
		select {
		case <-t.done:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		// Calls whose callers left (a client without context
		// timeouts) may still install leases: wait for them, so that
		// the closing tick gives those back too.
		if err = t.g.WaitCalls(ctx); err != nil {
			return
		}
		if !t.g.Open() {
			t.tick(ctx, true)
		}
		err = t.g.Close(ctx)
		if werr := t.b.Wait(ctx); err == nil {
			err = werr
		}
	})
	return err
}

// loop runs the sync every interval until Close.
func (t *table[E]) loop() {
	defer close(t.done)
	tk := time.NewTicker(t.interval)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tk.C:
			if !t.g.Open() {
				ctx, cancel := context.WithTimeout(context.Background(), syncTimeout(&t.b.Cfg))
				t.tick(ctx, false)
				cancel()
			} else {
				t.tick(nil, false) // memory only: no Redis call while it is down
			}
		}
	}
}

// syncCall is one key's call of a tick: give back rel unused units held
// in the bucket that started at start, record push declines (suppressed),
// and, for a renewal, reserve a new lease of up to want units for the
// lease of generation gen. releaseOnly: it gives back the units of a
// replaced lease, and its reply's figures are not the current lease's.
type syncCall[E keyEntry] struct {
	e                  E
	soft, hard         int64
	start, rel, push   int64
	want, gen          int64
	ahead              int64 // a renewal's D argument
	renew, releaseOnly bool
}

// tick visits up to maxVisits keys and makes up to maxCalls Redis calls:
// it updates each key's rate and lease size, forgets idle keys, gives back
// unused units, renews leases of keys in use that would expire before the
// next tick, and for suppressed keys sends declines and refreshes figures
// (Suppressed.refresh). An old lease serves until its renewal installs. A
// tick never makes a caller wait. closing gives back every lease and
// renews none, first waiting (until ctx is done) for each key's call in
// flight; ctx nil makes no Redis call.
func (t *table[E]) tick(ctx context.Context, closing bool) {
	t.tmu.Lock()
	t.tracked = append(t.tracked, t.fresh...)
	t.fresh = nil
	all := t.tracked
	t.tmu.Unlock()

	visit := all
	if !closing && len(visit) > maxVisits {
		visit = visit[:maxVisits]
	}
	now := t.now()
	t.ticks++
	keep := t.spare[:0]
	var calls []syncCall[E]
	for _, e := range visit {
		if ctx != nil && !closing && len(calls) >= maxCalls {
			keep = append(keep, e)
			continue
		}
		fetch := e.base().fetch
		held := false
		if closing {
			select {
			case fetch <- struct{}{}:
				held = true
			case <-ctx.Done():
			}
		}
		var stay bool
		calls, stay = t.visit(calls, e, now, closing, ctx != nil)
		if held {
			<-fetch
		}
		if stay {
			keep = append(keep, e)
		}
	}
	t.tmu.Lock()
	rest := all[len(visit):]
	// keys added meanwhile are in t.fresh; the unvisited go first
	if len(rest) == 0 {
		t.tracked = keep
	} else {
		t.tracked = append(append(make([]E, 0, len(rest)+len(keep)), rest...), keep...)
	}
	t.tmu.Unlock()
	clear(all) // no key forgotten stays reachable from it
	t.spare = all[:0]
	if forgot := len(visit) - len(keep); forgot > 0 && !closing {
		t.shrink()
		if cap(all) >= shrinkMin && len(all)-forgot <= cap(all)/shrinkBelow {
			t.spare = nil // the next tick's list is allocated to its size
		}
	}

	for len(calls) > 0 && ctx.Err() == nil {
		n := min(len(calls), pipeBatch)
		t.sendBatch(ctx, calls[:n])
		calls = calls[n:]
	}
}

// visit looks at one key for a tick and appends its calls, if any. It
// reports whether the key stays in memory.
func (t *table[E]) visit(calls []syncCall[E], e E, now int64, closing, redisOK bool) ([]syncCall[E], bool) {
	x := e.base()
	x.mu.Lock()
	defer x.mu.Unlock()
	used := x.used
	x.used = 0
	x.est = (x.est + float64(used)) / 2
	// About two sync intervals' worth at the key's rate, or what the
	// last leases showed (resize), whichever is more.
	x.want = min(max(int64(math.Ceil(2*x.est)), x.want, 1), max(x.hard, 1), t.maxLease)
	// idle counts ticks since the latest visit (1 if called since), so a
	// key visited every few ticks is not kept longer.
	switch {
	case used > 0:
	case x.idle == 0:
		x.idle = 1
	default:
		x.idle += t.ticks - x.visited
	}
	x.visited = t.ticks
	if !redisOK {
		return calls, !closing
	}
	for i := 0; i+1 < len(x.pend); i += 2 {
		calls = append(calls, syncCall[E]{e: e, soft: x.soft, hard: x.hard, start: x.pend[i], rel: x.pend[i+1], releaseOnly: true})
	}
	x.pend = x.pend[:0]
	call := syncCall[E]{e: e, soft: x.soft, hard: x.hard, gen: x.gen}
	full := x.hard-x.acc < x.hard/4 // the key was nearly full at the latest reply
	expired := now >= x.until
	recent := now-x.lastUse < renewWithin*(t.b.Cfg.BucketMs+t.interval.Milliseconds())
	// quiet: an expired lease is given back by a tick only B + D after
	// the key's latest use; an earlier call sends it with its lease
	// request (meanwhile the units count, which only admits less).
	quiet := now-x.lastUse >= t.b.Cfg.BucketMs+x.aheadArg(t.ahead)
	switch {
	case closing:
		if x.left > 0 {
			call.start, call.rel = x.start, x.left
			x.left, x.until, x.granted = 0, 0, 0
		}
	case x.until > 0 && x.hits > 0 && recent && (x.left == 0 || !x.slow && now+t.interval.Milliseconds() >= x.until) && !(full && used == 0):
		// Renew a lease that answered from memory, on a key in use lately,
		// when it is used up or expires before the next tick on a key that
		// uses its leases up (slow keys are left to their Incs). An expired
		// lease is given back in the same call.
		if expired {
			if x.left > 0 {
				call.start, call.rel = x.start, x.left
				x.resize(t.maxLease)
			}
			x.left, x.until, x.granted = 0, 0, 0
			x.ended(call.rel > 0)
		}
		call.want, call.renew = t.wantFor(x, x.soft, x.hard), true
		call.ahead = x.aheadArg(t.ahead)
		x.renews++
	case x.left > 0 && used == 0 && (full || expired && quiet):
		// Idle since the last tick, with the lease expired (and the key
		// quiet) or the key nearly full (others may wait for the units):
		// give the rest back. An idle key with room keeps its lease.
		call.start, call.rel = x.start, x.left
		x.resize(t.maxLease)
		if expired {
			x.ended(true)
		}
		x.left, x.until, x.granted = 0, 0, 0
	}
	if call.rel > 0 || call.renew || t.s.refresh(e, now, used, closing) {
		call.push = x.decl
		x.decl = 0
		calls = append(calls, call)
	}
	if closing {
		return calls, false
	}
	// A key whose fetch token is held has a lease request in flight (an
	// Inc's, which would install its lease in an entry that left).
	if x.idle >= idleTicks && x.left == 0 && len(x.pend) == 0 && x.renews == 0 && x.decl == 0 && !x.ref.Live(now) && len(x.fetch) == 0 {
		t.forget(x)
		return calls, false
	}
	return calls, true
}

// sendBatch sends one pipeline of a tick's calls (again with EVAL on
// NOSCRIPT). A call that writes holds the key's fetch token
// (holdFetches); without it, it neither leases nor reports, and its
// declines go back to the key.
func (t *table[E]) sendBatch(ctx context.Context, batch []syncCall[E]) {
	held := holdFetches(len(batch), func(i int) (chan struct{}, bool) {
		return batch[i].e.base().fetch, batch[i].renew || batch[i].push > 0
	})
	for i := range batch {
		if s := &batch[i]; !held[i] && s.push > 0 {
			x := s.e.base()
			x.mu.Lock()
			x.decl = addDeclined(x.decl, s.push)
			x.mu.Unlock()
		}
	}
	defer releaseFetches(held, func(i int) chan struct{} { return batch[i].e.base().fetch })
	pipeCalls(ctx, t.b.Client, t.kind.sync, t.now, len(batch), func(i int) (string, []any) {
		s := &batch[i]
		switch {
		case s.renew && held[i]:
			t.renewals.Add(1)
		case s.rel > 0:
			t.releases.Add(1)
		default:
			t.refreshes.Add(1)
		}
		return s.e.base().hash, t.s.syncArgs(s, held[i])
	}, func(i int, send int64, cmd *redis.Cmd) {
		s := &batch[i]
		err := cmd.Err()
		if err == nil {
			err = t.s.synced(s, held[i], send, cmd.Val())
		}
		if err != nil {
			// A failure costs only counted units or lost declines; the
			// breaker is left to the callers' own calls (a tick's failure,
			// say a stale pooled connection, must not open it).
			t.syncErrs.Add(1)
		}
		if s.renew {
			x := s.e.base()
			x.mu.Lock()
			x.renews--
			x.mu.Unlock()
		}
	})
}

// addDeclined adds n units declined from memory to d, capped at
// window.MaxDeclined as sup_inc.lua caps a push.
func addDeclined(d, n int64) int64 { return min(d+n, window.MaxDeclined) }
