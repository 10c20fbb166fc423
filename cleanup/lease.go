package cleanup

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
)

// lease is the lock that lets one cleaner at a time walk a prefix: a string
// key set with SET NX PX to a random token, renewed and released by
// owner-checked scripts (lease_renew.lua, lease_release.lua). A renewal
// that succeeds proves that nobody else held the lock since the last one:
// another cleaner could only have set its own token, and a token never
// comes back. Safe for concurrent use by the goroutines of one pass.
type lease struct {
	client Client
	key    string
	token  string
	ttl    time.Duration

	mu      sync.Mutex
	held    bool
	renewed time.Time // when the last successful SET or renewal was sent
}

func newLease(client Client, prefix string, ttl time.Duration) *lease {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil { // Go 1.24 on: never
		binary.LittleEndian.PutUint64(b[:], uint64(time.Now().UnixNano()))
	}
	return &lease{client: client, key: prefix + ":cleanup:lock", token: hex.EncodeToString(b[:]), ttl: ttl}
}

// acquire takes the lease, or renews it, and reports whether it is held.
func (l *lease) acquire(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sent := time.Now()
	ok, err := l.client.SetNX(ctx, l.key, l.token, l.ttl).Result()
	if err != nil {
		return l.lost(), fmt.Errorf("cleanup: lease %s: %w", l.key, err)
	}
	if ok {
		l.held, l.renewed = true, sent
		return true, nil
	}
	return l.renewLocked(ctx, sent)
}

// remaining is how long the lease has left, whoever holds it.
func (l *lease) remaining(ctx context.Context) (time.Duration, error) {
	d, err := l.client.PTTL(ctx, l.key).Result()
	if err != nil || d < 0 {
		return 0, err
	}
	return d, nil
}

// lost forgets a lease whose renewal failed for longer than it lasts.
func (l *lease) lost() bool {
	if l.held && time.Since(l.renewed) >= l.ttl {
		l.held = false
	}
	return l.held
}

// renewLocked renews the lease if this cleaner holds it in Redis, and
// records the result; sent is when the attempt to hold it began.
func (l *lease) renewLocked(ctx context.Context, sent time.Time) (bool, error) {
	n, err := renewScript.Run(ctx, l.client, []string{l.key}, l.token, l.ttl.Milliseconds()).Int64()
	if err != nil {
		return l.lost(), fmt.Errorf("cleanup: renewing lease %s: %w", l.key, err)
	}
	l.held = n == 1
	if l.held {
		l.renewed = sent
	}
	return l.held, nil
}

// check, before every key, renews the lease once a third of it has passed
// and reports whether it is still held.
func (l *lease) check(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held || time.Since(l.renewed) < l.ttl/3 {
		return l.held, nil
	}
	return l.renewLocked(ctx, time.Now())
}

// release gives the lease up if this cleaner holds it, within a second
// and even when ctx is done (a stopped cleaner still releases).
func (l *lease) release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held {
		return nil
	}
	l.held = false
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := releaseScript.Run(ctx, l.client, []string{l.key}, l.token).Err(); err != nil {
		return fmt.Errorf("cleanup: releasing lease %s: %w", l.key, err)
	}
	return nil
}
