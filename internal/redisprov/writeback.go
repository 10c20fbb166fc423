// The write-back: after an outage, the units the fallback admitted are
// written to Redis, recorded as admitted whatever Redis holds.

package redisprov

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

// reconcileBatch is how many keys one pipeline of the write-back carries.
const reconcileBatch = 256

// tally is what the passes of one recovery did, by pending entry (a key,
// or a key and set pair): those written, those lost with their units (a
// loss is final), and those never remembered (MaxPending).
type tally struct {
	done      map[string]bool
	lost      map[string]int64
	dropped   int
	droppedUn int64
	again     []*Pending // to write when Redis answers again
}

func newTally() tally { return tally{done: make(map[string]bool), lost: make(map[string]int64)} }

// counts returns StateChange's Reconciled, Unreconciled and
// UnreconciledUnits.
func (t *tally) counts() (done, lost int, units int64) {
	units = t.droppedUn
	for _, n := range t.lost {
		units += n
	}
	for id := range t.done {
		if _, ok := t.lost[id]; !ok {
			done++
		}
	}
	return done, len(t.lost) + t.dropped, units
}

// dropPending counts every pending entry as not written.
func (g *Guard) dropPending(t *tally) {
	g.pmu.Lock()
	pend := g.pending
	g.pending = make(map[string]*Pending)
	g.pmu.Unlock()
	for id, p := range pend {
		t.lost[id] += p.Units
	}
}

// reconcile writes the units the fallback admitted since the last pass
// and still counts, in pipelines of reconcileBatch keys; a pass with the
// breaker closed stops when it opens again. Entries whose write must wait
// for Redis go back to the pending ones, and reconcile returns true.
func (g *Guard) reconcile(closed bool, t *tally) bool {
	g.pmu.Lock()
	pend := g.pending
	t.dropped += g.dropped + len(g.droppedIDs)
	t.droppedUn += g.droppedUnits
	g.pending, g.droppedIDs, g.dropped, g.droppedUnits = make(map[string]*Pending), nil, 0, 0
	g.pmu.Unlock()
	fbp := g.fb.Load()
	if len(pend) == 0 || fbp == nil {
		return false
	}
	now := g.cfg.NowMs()
	items := make([]*Pending, 0, len(pend))
	for id, p := range pend {
		p.id = id
		if now-p.LastMs >= p.span {
			continue // dead in the window: nothing to count
		}
		// The fallback may also hold an earlier outage's units.
		live, err := g.liveUnits(*fbp, p)
		if err != nil {
			t.lost[id] += p.Units
			continue
		}
		if p.Units = min(p.Units, live); p.Units > 0 {
			items = append(items, p)
		}
	}
	if len(items) == 0 {
		return false
	}
	one, many := g.b.incScripts()
	for _, sc := range []*redis.Script{one, many} {
		ctx, cancel := context.WithTimeout(g.stopCtx, g.probeDeadline())
		sc.Load(ctx, g.b.Client)
		cancel()
	}
	for len(items) > 0 {
		n := min(len(items), reconcileBatch)
		g.writeBatch(items[:n], t)
		items = items[n:]
		if g.stopCtx.Err() != nil {
			for _, p := range items {
				t.lost[p.id] += p.Units
			}
			break
		}
		if closed && g.open.Load() {
			t.again = append(t.again, items...)
			break
		}
	}
	if len(t.again) == 0 {
		return false
	}
	g.requeue(t.again)
	t.again = t.again[:0]
	return true
}

// requeue puts back entries whose write must wait for Redis, adding to
// what the fallback admitted for them since.
func (g *Guard) requeue(ps []*Pending) {
	g.pmu.Lock()
	defer g.pmu.Unlock()
	for _, p := range ps {
		q := g.pending[p.id]
		switch {
		case q != nil:
			q.Units += p.Units
			q.LastMs = max(q.LastMs, p.LastMs)
		case len(g.pending) < MaxPending:
			g.pending[p.id] = p
		default:
			g.drop(p.id, p.Units)
		}
	}
}

// liveUnits returns the units the fallback still counts for p: on a set,
// the most any of its limits counts (each limit is written as many).
func (g *Guard) liveUnits(fb limiter.Limiter, p *Pending) (int64, error) {
	if p.Set == nil {
		u, err := fb.Get(g.stopCtx, p.Key)
		return u.Used, err
	}
	us, err := fb.(limiter.SetLimiter).GetSet(g.stopCtx, p.Key, g.scaledSet(p.Set))
	live := int64(0)
	for _, u := range us {
		live = max(live, u.Used)
	}
	return live, err
}

// writeBatch writes one batch, as one pipeline where the client has them.
func (g *Guard) writeBatch(batch []*Pending, t *tally) {
	ctx, cancel := context.WithTimeout(g.stopCtx, g.probeDeadline())
	defer cancel()
	cmds := make([]*redis.Cmd, len(batch))
	queue := func(sc redis.Scripter) {
		for i, p := range batch {
			cmds[i] = g.queue(ctx, sc, p, p.Units)
		}
	}
	if ok, _ := Pipelined(ctx, g.b.Client, queue); !ok {
		queue(g.b.Client)
	}
	for i, cmd := range cmds {
		switch err := cmd.Err(); {
		case err == nil:
			t.done[batch[i].id] = true
		case (Unavailable(err) || NoScript(err)) && g.stopCtx.Err() == nil:
			// NOSCRIPT: the server lost its scripts after the load above
			// (a restart); the next pass loads them again.
			t.again = append(t.again, batch[i])
		default:
			t.lost[batch[i].id] += batch[i].Units
		}
	}
}

// queue adds to pipe the write of n units of p's key (in every limit of
// p.Set) in the scripts' mode WriteBack, at the key's latest rate with a
// draw of 0; the command's error, read after the pipeline ran, is nil when
// Redis recorded them.
func (g *Guard) queue(ctx context.Context, pipe redis.Scripter, p *Pending, n int64) *redis.Cmd {
	b := g.b
	one, many := b.incScripts()
	if p.Set == nil {
		// The rate was validated by the Inc that admitted them.
		soft, _ := limiter.Capacity(p.Rate, b.Cfg.Window)
		hs := []string{p.Hash}
		if !b.sup {
			return one.EvalSha(ctx, pipe, hs, NowArg(&b.Cfg), b.W, b.B, soft, n, b.TTL, 0, 0, 0, 0, WriteBack)
		}
		hard, _ := window.HardCapacity(p.Rate, b.Cfg.Window, b.Cfg.HardLimitFactor)
		return one.EvalSha(ctx, pipe, hs, NowArg(&b.Cfg), b.W, b.B, soft, hard, n, b.Cache, 0, b.TTL, 0, 0, 0, 0, 0, WriteBack)
	}
	var lb [window.MaxSet]window.Limit
	hs, ls, err := SetsOf(b).setCall("inc set", p.Key, p.Set, 0, &lb)
	if err != nil {
		cmd := redis.NewCmd(ctx) // failed before it was sent
		cmd.SetErr(err)
		return cmd
	}
	return many.EvalSha(ctx, pipe, hs, setArgv(b, ls, n, 0, true)...)
}
