package redisprov

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

// refusal is Redis's refusal of one unit at capacity 10: retry ms, reset
// ms.
func refusedAt(retry, reset int64) window.Result {
	return window.Result{Outcome: window.OutcomeRejected, Limit: 10, RetryAfter: retry, ResetAfter: reset}
}

func newMemory() *Memory {
	m := new(Memory)
	m.Init(1000, 10, 100)
	return m
}

func TestAnswerCountsDown(t *testing.T) {
	m := newMemory()
	r := refusedAt(300, 900)
	m.Remember("k", m.Begin("k"), 10, 10, 1, 1000, &r)
	for _, tc := range []struct {
		name    string
		c, n    int64
		now     int64
		ok      bool
		retry   int64
		resetMs int64
	}{
		{"at once", 10, 1, 1000, true, 300, 900},
		{"later", 10, 1, 1200, true, 100, 700},
		{"last ms", 10, 1, 1299, true, 1, 601},
		{"at RetryAfter", 10, 1, 1300, false, 0, 0},
		{"another rate", 20, 1, 1100, false, 0, 0},
		{"a larger cost", 10, 2, 1100, false, 0, 0},
		{"a peek", 10, 0, 1100, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := m.Answer("k", tc.c, tc.c, tc.n, tc.now, 0)
			if ok != tc.ok {
				t.Fatalf("Answer(c=%d, n=%d, now=%d) ok = %v, want %v", tc.c, tc.n, tc.now, ok, tc.ok)
			}
			if ok && (got.Allowed || got.RetryAfter != tc.retry || got.ResetAfter != tc.resetMs || got.Limit != 10 || got.FactorPPM != 0) {
				t.Fatalf("Answer at %d = %+v, want refused, retry %d, reset %d, factor 0", tc.now, got, tc.retry, tc.resetMs)
			}
		})
	}
}

func TestOnlyOneUnitRefusalsAreRemembered(t *testing.T) {
	m := newMemory()
	r := refusedAt(300, 900)
	m.Remember("k", m.Begin("k"), 10, 10, 2, 1000, &r)
	never := r
	never.Never = true
	m.Remember("n", m.Begin("n"), 10, 10, 1, 1000, &never)
	if m.Len() != 0 {
		t.Fatalf("Len = %d after a refusal of 2 units and a never, want 0", m.Len())
	}
}

func TestOtherCallsKeepItExact(t *testing.T) {
	m := newMemory()
	r := refusedAt(300, 900)
	m.Remember("k", m.Begin("k"), 10, 10, 1, 1000, &r)
	// An admission at the same capacity (another instance's units
	// expired, say) moves ResetAfter and Remaining; the refusal stays.
	adm := window.Result{Outcome: window.OutcomeAllowed, Allowed: true, Limit: 10, ResetAfter: 1010}
	m.Remember("k", m.Begin("k"), 10, 10, 1, 1100, &adm)
	if got, ok := m.Answer("k", 10, 10, 1, 1100, 0); !ok || got.ResetAfter != 1010 || got.RetryAfter != 200 {
		t.Fatalf("after an admission: Answer = %+v, %v; want refused, reset 1010, retry 200", got, ok)
	}
	// A call at another rate stores its capacity in Redis: forgotten.
	m.Remember("k", m.Begin("k"), 20, 20, 1, 1150, &adm)
	if _, ok := m.Answer("k", 10, 10, 1, 1150, 0); ok {
		t.Fatal("Answer after a call at another rate: answered, want Redis asked")
	}
}

// TestLateAdmissionWithRoomForgets: concurrent replies arrive in any
// order, so an admission that left room may be read after a later
// refusal; the refusal must not then answer with that Remaining (a
// refusal of one unit with Remaining > 0), nor go on refusing while Redis
// has room. Regression: TestExactUnderConcurrency saw refusals with
// Remaining 1 to 14 on a Ring and a Cluster.
func TestLateAdmissionWithRoomForgets(t *testing.T) {
	m := newMemory()
	r := refusedAt(300, 900)
	m.Remember("k", m.Begin("k"), 10, 10, 1, 1000, &r)
	adm := window.Result{Outcome: window.OutcomeAllowed, Allowed: true, Limit: 10, Remaining: 3, ResetAfter: 950}
	m.Remember("k", m.Begin("k"), 10, 10, 1, 1000, &adm)
	if got, ok := m.Answer("k", 10, 10, 1, 1001, 0); ok {
		t.Fatalf("Answer after an admission with Remaining 3 = %+v, want Redis asked", got)
	}
}

// TestClockSteppedBack: a refusal remembered at a later local time than
// now (the clock stepped back) answers nothing; Redis judges a key whose
// buckets are dated in the future. Regression: the conformance table
// "clock jumps a year ahead and back" refused from memory what Redis
// admitted.
func TestClockSteppedBack(t *testing.T) {
	m := newMemory()
	r := refusedAt(300, 900)
	m.Remember("k", m.Begin("k"), 10, 10, 1, 1000, &r)
	if _, ok := m.Answer("k", 10, 10, 1, 999, 0); ok {
		t.Fatal("Answer 1 ms before the refused call was sent: answered, want Redis asked")
	}
	if _, ok := m.Answer("k", 10, 10, 1, 1000, 0); !ok {
		t.Fatal("Answer when the refused call was sent: Redis asked, want answered")
	}
}

func TestForgetBeatsACallInFlight(t *testing.T) {
	m := newMemory()
	tok := m.Begin("k")
	m.Forget("k") // a Reset while the call was in flight
	r := refusedAt(300, 900)
	m.Remember("k", tok, 10, 10, 1, 1000, &r)
	if _, ok := m.Answer("k", 10, 10, 1, 1000, 0); ok {
		t.Fatal("a refusal from before Forget was remembered")
	}
	m.Remember("k", m.Begin("k"), 10, 10, 1, 1000, &r)
	m.Forget("k")
	if _, ok := m.Answer("k", 10, 10, 1, 1000, 0); ok {
		t.Fatal("Answer after Forget: answered")
	}
}

// TestBoundedUnderManyKeys: refusals of many more keys than MaxKeys leave
// at most MaxKeys entries, and dead ones are dropped by the writes that
// meet them.
func TestBoundedUnderManyKeys(t *testing.T) {
	m := newMemory()
	r := refusedAt(5, 5)
	now := int64(1000)
	for i := 0; i < 2*MaxKeys; i++ {
		k := fmt.Sprint("key", i)
		m.Remember(k, m.Begin(k), 10, 10, 1, now, &r)
		now++ // each refusal dies 5 ms after it was made
	}
	if n := m.Len(); n > MaxKeys || n > MaxKeys/2 {
		t.Fatalf("Len = %d after %d refusals each dead 5 ms later, want at most %d", n, 2*MaxKeys, MaxKeys/2)
	}
	long := refusedAt(1_000_000, 1_000_000) // none dies
	for i := 0; i < MaxKeys+MaxKeys/4; i++ {
		k := fmt.Sprint("live", i)
		m.Remember(k, m.Begin(k), 10, 10, 1, now, &long)
	}
	if n := m.Len(); n > MaxKeys {
		t.Fatalf("Len = %d with every entry live, want at most %d", n, MaxKeys)
	}
}

func TestSuppressedDeclinesAndBuckets(t *testing.T) {
	m := newMemory() // W 1000, B 10, cache 100
	r := window.Result{Outcome: window.OutcomeSuppressed, Limit: 10, RetryAfter: 500, ResetAfter: 1005, FactorPPM: window.PPM}
	m.Remember("k", m.Begin("k"), 10, 10, 1, 1000, &r) // newest bucket opened at 1000 + 1005 − 1010 = 995
	for now := int64(1000); now < 1005; now++ {
		if _, ok := m.Answer("k", 10, 10, 1, now, 999_999); !ok {
			t.Fatalf("Answer at %d, joining the newest bucket: not answered", now)
		}
	}
	if _, ok := m.Answer("k", 10, 10, 1, 1005, 0); ok {
		t.Fatal("Answer at 1005, which opens a bucket: answered, want Redis asked")
	}
	if p := m.Pending("k", 1005); p != 5 {
		t.Fatalf("Pending = %d, want the 5 declined units", p)
	}
	if d := m.Take("k", 1005); d != 5 {
		t.Fatalf("Take = %d, want 5", d)
	}
	if d := m.Take("k", 1006); d != 0 {
		t.Fatalf("Take again = %d, want 0", d)
	}
	m.Restore("k", 3, 1006)
	if d := m.Take("k", 2005); d != 0 {
		t.Fatalf("Take after the bucket died = %d, want 0 (Redis would not count them)", d)
	}
	// A factor below 1 answers only the draws Redis would refuse, for one
	// cache period.
	f := window.Result{Outcome: window.OutcomeSuppressed, Limit: 10, RetryAfter: 500, ResetAfter: 1010, FactorPPM: 600_000}
	m.Remember("f", m.Begin("f"), 10, 15, 1, 1000, &f)
	if _, ok := m.Answer("f", 10, 15, 1, 1001, 599_999); !ok {
		t.Fatal("a draw below the factor: not answered")
	}
	if _, ok := m.Answer("f", 10, 15, 1, 1001, 600_000); ok {
		t.Fatal("a draw at the factor: answered, want Redis asked")
	}
	if _, ok := m.Answer("f", 10, 15, 1, 1100, 0); ok {
		t.Fatal("one cache period after: answered, want Redis asked")
	}
}

// TestRememberedPathAllocatesNothing: the answer from memory makes no
// allocation.
func TestRememberedPathAllocatesNothing(t *testing.T) {
	m := newMemory()
	r := refusedAt(1_000_000, 1_000_000)
	m.Remember("hot", m.Begin("hot"), 10, 10, 1, 1000, &r)
	if a := testing.AllocsPerRun(1000, func() {
		if _, ok := m.Answer("hot", 10, 10, 1, 1500, 0); !ok {
			t.Fatal("not answered")
		}
	}); a != 0 {
		t.Fatalf("%v allocations per remembered answer, want 0", a)
	}
}

// TestMaxStale: a refusal with a RetryAfter far beyond MaxStale (a day
// quota's) answers until MaxStale after its send and no longer, so that a
// change made elsewhere (a Reset) is seen by the next call after it.
func TestMaxStale(t *testing.T) {
	m := newMemory()
	r := refusedAt(86_400_000, 86_400_000)
	m.Remember("day", m.Begin("day"), 10, 10, 1, 1000, &r)
	d, ok := m.Answer("day", 10, 10, 1, 1000+MaxStale-1, 0)
	if !ok || d.RetryAfter != 86_400_000-MaxStale+1 {
		t.Fatalf("Answer %d ms after the refusal = %+v, %v; want answered, RetryAfter counting down", MaxStale-1, d, ok)
	}
	if _, ok := m.Answer("day", 10, 10, 1, 1000+MaxStale, 0); ok {
		t.Fatalf("Answer %d ms after the refusal: answered, want Redis asked", MaxStale)
	}
}

// TestDecideOneCallWhenExpired: when a remembered refusal expires under
// many callers, one asks Redis and the others take its answer.
func TestDecideOneCallWhenExpired(t *testing.T) {
	m := newMemory()
	r := refusedAt(100, 900)
	m.Remember("k", m.Begin("k"), 10, 10, 1, 1000, &r)
	var now atomic.Int64
	now.Store(1100) // expired
	var asks atomic.Int64
	release := make(chan struct{})
	ask := func(context.Context, int64) (window.Result, error) {
		asks.Add(1)
		<-release
		return refusedAt(100, 800), nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, _, err := m.Decide(context.Background(), "k", 10, 10, 1, 0, now.Load, ask)
			if err != nil || got.Allowed {
				errs <- fmt.Errorf("Decide = %+v, %v; want refused", got, err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // let them gather behind the one call
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := asks.Load(); n != 1 {
		t.Fatalf("%d Redis calls for 32 callers of an expired refusal, want 1", n)
	}
}

// TestPeeksShareExactly: a peek never takes the answer of a round trip
// sent before it began, and concurrent peeks share one.
func TestPeeksShareExactly(t *testing.T) {
	var p Peeks
	var sent atomic.Int64
	first := make(chan struct{})
	block := make(chan struct{})
	fn := func(context.Context) (limiter.Decision, error) {
		n := sent.Add(1)
		if n == 1 {
			close(first)
			<-block
		}
		return limiter.Decision{Remaining: n}, nil
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if d, _ := p.Do(context.Background(), "k", fn); d.Remaining != 1 {
			t.Errorf("the first peek got round trip %d, want 1", d.Remaining)
		}
	}()
	<-first // round trip 1 is in flight: later peeks must not take it
	got := make(chan int64, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, _ := p.Do(context.Background(), "k", fn)
			got <- d.Remaining
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(block)
	wg.Wait()
	close(got)
	for n := range got {
		if n != 2 {
			t.Fatalf("a peek begun during round trip 1 got round trip %d, want 2", n)
		}
	}
	if n := sent.Load(); n != 2 {
		t.Fatalf("%d round trips for 9 peeks, want 2", n)
	}
	// A waiter whose context ends leaves; the key's slot is dropped.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Do(ctx, "k", fn); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Do with a cancelled context: %v", err)
	}
	p.mu.Lock()
	left := len(p.m)
	p.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d keys left in Peeks after every peek returned, want 0", left)
	}
}
