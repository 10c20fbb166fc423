package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNeverFits is returned by Wait when the limiter reports Never: the cost
// exceeds the capacity, so no wait can make the request fit.
var ErrNeverFits = errors.New("sluice: request can never fit")

// minWaitSleep is the shortest pause Wait takes between two tries.
const minWaitSleep = time.Millisecond

// Wait blocks until l admits n units of key at rate, and returns the
// admitting Decision. It calls l.Inc, and after each refusal (a Degraded
// one too) sleeps the decision's RetryAfter, at least 1 ms (a suppressed
// refusal may report 0), before trying again. n has Inc's meaning: n = 0
// waits until one unit would be admitted and records nothing.
//
// Wait returns early, with the last refused Decision (the zero Decision if
// it never called Inc) and an error:
//   - ctx is done before a try or during a sleep: ctx.Err(), unwrapped;
//   - ctx has a deadline that comes before the next try would: at once,
//     without sleeping, an error wrapping context.DeadlineExceeded;
//   - the decision has Never set: at once, an error wrapping ErrNeverFits;
//   - Inc fails (bad key, rate or cost, a closed limiter, a backend error):
//     Inc's Decision and error, as they are.
//
// So errors.Is(err, context.Canceled) or errors.Is(err,
// context.DeadlineExceeded) holds whenever Wait gave up because of ctx.
// Wait is safe for concurrent use if l is; waiters are not queued, so under
// contention any of them may be admitted first.
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
