package hybrid

import (
	"context"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/internal/window"
)

// Close stops the sync, gives back the unused units of every lease (and,
// suppressed, sends the unsent declines) and marks the limiter closed:
// later calls return ErrClosed. Units admitted stay counted in Redis. It
// waits for the sync and the failure policy's probe until ctx is done,
// then returns ctx's error (leases not given back expire with their
// buckets). It does not close the client. Closing twice is harmless.
func (t *table[E]) Close(ctx context.Context) error {
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
		// Calls whose callers left may still install leases: the closing
		// tick gives those back too.
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
			if t.g.Open() {
				t.tick(nil, false) // memory only: no Redis call while it is down
				continue
			}
			// A tick has no caller: without WithTimeout, 1 s bounds it.
			timeout := t.b.Cfg.Timeout
			if timeout <= 0 {
				timeout = time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			t.tick(ctx, false)
			cancel()
		}
	}
}

// syncCall is one key's call of a tick: give back rel units of the bucket
// that started at start, record push declines and, for a renewal, reserve
// up to want units for the lease of generation gen. releaseOnly: it gives
// back a replaced lease, and its reply's figures are not the current one's.
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
// unused units, renews the leases of keys in use before they expire, and
// sends declines and refreshes figures (strategy.refresh). It never makes
// a caller wait. closing gives back every lease, first waiting (until ctx
// is done) for each key's call in flight; ctx nil makes no Redis call.
func (t *table[E]) tick(ctx context.Context, closing bool) {
	all := t.tracked
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		all = append(all, s.fresh...)
		s.fresh = nil
		s.mu.Unlock()
	}

	now := t.now()
	t.ticks++
	// Parked keys come back to be visited when they may leave memory, and
	// all of them for Close, which waits for their lease requests.
	n := 0
	for ; n < len(t.parked) && (t.parked[n].due <= t.ticks || closing); n++ {
		p := t.parked[n]
		x := p.e.base()
		x.mu.Lock()
		if x.parked > 0 && x.visited == p.at { // else a reply brought it back meanwhile
			x.parked -= 3 // 1 → -2, 2 (called since) → -1
			all = append(all, p.e)
		}
		x.mu.Unlock()
	}
	clear(t.parked[:n])
	if t.parked = t.parked[n:]; len(t.parked) == 0 {
		t.parked = nil
	}
	parked := len(t.parked)

	visit := all
	if !closing && len(visit) > maxVisits {
		visit = visit[:maxVisits]
	}
	keep := t.spare[:0]
	var calls []syncCall[E]
	for _, e := range visit {
		if ctx != nil && !closing && len(calls) >= maxCalls {
			keep = append(keep, e)
			continue
		}
		x := e.base()
		held := closing && x.waitFetch(ctx)
		var stay bool
		calls, stay = t.visit(calls, e, now, closing, ctx != nil)
		if held {
			x.mu.Lock()
			x.endFetch()
			x.mu.Unlock()
		}
		if stay {
			keep = append(keep, e)
		}
	}
	rest := all[len(visit):] // the unvisited go first
	if len(rest) == 0 {
		t.tracked = keep
	} else {
		t.tracked = append(append(make([]E, 0, len(rest)+len(keep)), rest...), keep...)
	}
	clear(all) // no key forgotten stays reachable from it
	t.spare = all[:0]
	if forgot := len(visit) - len(keep) - (len(t.parked) - parked); forgot > 0 && !closing {
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
	steps := int64(1) // the ticks without a call this visit stands for
	wasParked := x.parked != 0
	if wasParked { // as if visited every tick while parked
		gap := t.ticks - x.visited
		for g := gap; g > 1 && x.est != 0; g-- {
			x.est /= 2
		}
		if x.parked == -2 {
			steps = gap
		}
		x.parked = 0
	}
	ncalls := len(calls)
	used := x.used
	x.used = 0
	x.est = (x.est + float64(used)) / 2
	// Two sync intervals' worth at the key's rate, or resize's if more.
	x.want = min(max(int64(math.Ceil(2*x.est)), x.want, 1), max(x.hard, 1), t.maxLease)
	// idle counts ticks, not visits (1 if called since); a key called
	// while parked counts them from its latest call.
	switch {
	case used > 0 && wasParked:
		x.idle = max(0, (now-x.lastUse)/max(t.interval.Milliseconds(), 1))
	case used > 0:
	case x.idle == 0:
		x.idle = steps
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
	full := x.hard-x.acc < x.hard/4 // nearly, at the latest reply
	expired := now >= x.until
	recent := now-x.lastUse < renewWithin*(t.b.Cfg.BucketMs+t.interval.Milliseconds())
	// quiet: a tick gives an expired lease back only B + D after the key's
	// latest use; a call before that sends it with its lease request.
	quiet := now-x.lastUse >= t.b.Cfg.BucketMs+x.aheadArg(t.ahead)
	switch {
	case closing:
		if x.left > 0 {
			call.start, call.rel = x.start, x.left
			x.left, x.until, x.granted = 0, 0, 0
		}
	case x.until > 0 && x.hits > 0 && recent && (x.left == 0 || !x.slow && now+t.interval.Milliseconds() >= x.until) && !(full && used == 0):
		// Renew a lease that answered from memory, on a key in use lately,
		// used up or expiring before the next tick (slow keys are left to
		// their Incs), giving an expired one back in the same call.
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
		// Idle, with the lease expired or the key nearly full (others may
		// wait for the units): give the rest back.
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
	// A held fetch token is a lease request in flight, which would install
	// its lease in an entry that left.
	if x.idle >= idleTicks && x.left == 0 && len(x.pend) == 0 && x.renews == 0 && x.decl == 0 && !x.ref.Live(now) && !x.fetching {
		t.forget(x)
		return calls, false
	}
	// A key that holds nothing for a tick to act on (its calls, if any,
	// took no lease) leaves the list until it may leave memory: ticks do
	// not look at it meanwhile. A lease request whose reply leaves it
	// something brings it back (leaseLocked).
	if len(calls) == ncalls && t.holdsNothing(x, now) {
		x.parked = 1
		t.parked = append(t.parked, parkSlot[E]{e, t.ticks, t.ticks + idleTicks - x.idle})
		return calls, false
	}
	return calls, true
}

// holdsNothing reports whether x holds nothing for a tick to act on, with
// x.mu held: no lease, units to give back, renewal in flight, declines,
// cached refusal, nor a lease that served a recent call.
func (t *table[E]) holdsNothing(x *entry, now int64) bool {
	recent := now-x.lastUse < renewWithin*(t.b.Cfg.BucketMs+t.interval.Milliseconds())
	return x.left == 0 && len(x.pend) == 0 && x.renews == 0 && x.decl == 0 &&
		(x.until == 0 || x.hits == 0 || !recent) && !x.ref.Live(now)
}

// parkSlot is a key parked at tick at, to come back at tick due.
type parkSlot[E keyEntry] struct {
	e       E
	at, due int64
}

// sendBatch sends one pipeline of a tick's calls, once more with EVAL
// those Redis found no script for. A call that asks for a lease or sends
// declines first takes the key's fetch token without waiting, and does
// neither without it (its declines go back to the key): a tick reads its
// clock before its pipeline reaches Redis, and an Inc of the key may read
// a later one and reach Redis first; under a clock that jumps (WithClock)
// the tick's lease request could then be dated W + B or more before the
// key's newest bucket, which the scripts take for a dead key, dropping the
// Inc's units.
func (t *table[E]) sendBatch(ctx context.Context, batch []syncCall[E]) {
	held := make([]bool, len(batch))
	for i := range batch {
		s := &batch[i]
		if !s.renew && s.push == 0 {
			continue
		}
		x := s.e.base()
		x.mu.Lock()
		if !x.fetching {
			x.fetching, held[i] = true, true
		} else if s.push > 0 {
			x.decl = addDeclined(x.decl, s.push)
		}
		x.mu.Unlock()
	}
	defer func() {
		for i, h := range held {
			if h {
				x := batch[i].e.base()
				x.mu.Lock()
				x.endFetch()
				x.mu.Unlock()
			}
		}
	}()
	cmds := make([]*redis.Cmd, len(batch))
	done := make([]bool, len(batch))
	script := t.kind.sync
	for round := 0; ; round++ {
		send := t.now()
		queue := func(sc redis.Scripter, pipelined bool) {
			for i := range cmds {
				if done[i] {
					continue
				}
				s := &batch[i]
				switch {
				case s.renew && held[i]:
					t.renewals.Add(1)
				case s.rel > 0:
					t.releases.Add(1)
				default:
					t.refreshes.Add(1)
				}
				keys, args := []string{s.e.base().hash}, t.s.syncArgs(s, held[i])
				if pipelined {
					cmds[i] = script.EvalSha(ctx, sc, keys, args...)
				} else {
					cmds[i] = script.Run(ctx, sc, keys, args...)
				}
			}
		}
		if ok, _ := redisprov.Pipelined(ctx, t.b.Client, func(pipe redis.Scripter) { queue(pipe, true) }); !ok {
			queue(t.b.Client, false)
		}
		last := round == 1 || ctx.Err() != nil
		missing := false
		for i, cmd := range cmds {
			if done[i] {
				continue
			}
			if !last && redisprov.NoScript(cmd.Err()) {
				missing = true
				continue
			}
			done[i] = true
			t.synced(&batch[i], held[i], send, cmd)
		}
		if !missing {
			return
		}
		script.Load(ctx, t.b.Client)
	}
}

// synced reads the final reply of a tick's call s, sent at send. A failure
// costs only counted units or lost declines; the breaker is left to the
// callers' own calls (a tick's failure, say on a stale pooled connection,
// must not open it).
func (t *table[E]) synced(s *syncCall[E], held bool, send int64, cmd *redis.Cmd) {
	err := cmd.Err()
	if err == nil {
		err = t.s.synced(s, held, send, cmd.Val())
	}
	if err != nil {
		t.syncErrs.Add(1)
	}
	if s.renew {
		x := s.e.base()
		x.mu.Lock()
		x.renews--
		x.mu.Unlock()
	}
}

// addDeclined adds n units declined from memory to d, capped at
// window.MaxDeclined as sup_inc.lua caps a push.
func addDeclined(d, n int64) int64 { return min(d+n, window.MaxDeclined) }
