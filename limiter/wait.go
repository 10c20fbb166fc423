package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNeverFits is returned by Wait for a decision with Never set.
var ErrNeverFits = errors.New("sluice: request can never fit")

// minWaitSleep is the shortest pause Wait takes between two tries.
const minWaitSleep = time.Millisecond

// Wait blocks until l admits n units of key at rate (n = 0: until one unit
// would be), and returns the admitting Decision. After each refusal it
// sleeps the decision's RetryAfter, at least 1 ms, and calls l.Inc again.
// It gives up with the last Decision (zero before any Inc) and an error:
// ctx.Err() when ctx is done; at once, one wrapping
// context.DeadlineExceeded when ctx's deadline comes before the next try,
// or ErrNeverFits for a Never decision; Inc's own error as it is. Wait is
// safe for concurrent use if l is; waiters are not queued.
func Wait(ctx context.Context, l Limiter, key string, rate Rate, n int64) (Decision, error) {
	return waitWith(ctx, l, key, rate, n, time.Now, sleepCtx)
}

// waitWith is Wait with its clock and sleep injected, for tests. now is
// compared only with ctx's deadline; sleep returns ctx.Err() if ctx is done
// before d has passed, nil after d.
func waitWith(ctx context.Context, l Limiter, key string, rate Rate, n int64,
	now func() time.Time, sleep func(context.Context, time.Duration) error) (Decision, error) {
	var d Decision
	for {
		if err := ctx.Err(); err != nil {
			return d, err
		}
		var err error
		d, err = l.Inc(ctx, key, rate, n)
		switch {
		case err != nil || d.Allowed:
			return d, err
		case d.Never:
			return d, fmt.Errorf("%w: %d units of %q at %v (limit %d)", ErrNeverFits, n, key, rate, d.Limit)
		}
		pause := max(d.RetryAfter, minWaitSleep)
		if deadline, ok := ctx.Deadline(); ok && deadline.Sub(now()) < pause {
			return d, fmt.Errorf("sluice: wait for %q: retry in %v would pass the context deadline: %w", key, pause, context.DeadlineExceeded)
		}
		if err := sleep(ctx, pause); err != nil {
			return d, err
		}
	}
}

// sleepCtx sleeps for d, or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
