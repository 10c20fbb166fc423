package hybrid

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestIdleCountsTicks: a key leaves memory idleTicks ticks after its
// latest call, not idleTicks visits: with 2 × maxVisits + 100 keys a
// tick visits each key once every 3 ticks, and every key holding nothing
// is gone within idleTicks + 2 passes (26 ticks; counting visits took 60).
// A key whose fetch token is held (an Inc's lease request in flight)
// stays. The ticks are the test's own (a sync once an hour); no call
// reaches Redis.
func TestIdleCountsTicks(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never called
	defer c.Close()
	l, err := NewAbsolute(c, WithSyncInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	const n = 2*maxVisits + 100
	for i := 0; i < n; i++ {
		if _, ok, err := l.entryFor("inc", "k"+strconv.Itoa(i)); !ok || err != nil {
			t.Fatalf("entryFor: %v, %v", ok, err)
		}
	}
	busy, _ := l.lookup("k7")
	busy.fetch <- struct{}{}
	ticks := 0
	for ; l.count.Load() > 1 && ticks < 100; ticks++ {
		l.tick(ctx, false)
	}
	if left := l.count.Load(); left != 1 || ticks > idleTicks+2*3 {
		t.Fatalf("%d keys left after %d ticks, want 1 (the busy one) within %d", left, ticks, idleTicks+2*3)
	}
	if _, ok := l.lookup("k7"); !ok {
		t.Fatal("the key with a lease request in flight left memory")
	}
	<-busy.fetch
	for i := 0; i < 3; i++ {
		l.tick(ctx, false)
	}
	if left := l.count.Load(); left != 0 {
		t.Fatalf("%d keys left once the request landed, want 0", left)
	}
	t.Logf("%d keys gone in %d ticks", n-1, ticks)
}
