package cleanup_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/internal/redistest"
)

// TestPing: the cleaner's start-up check answers nil on a healthy Redis
// and names the address of a dead one.
func TestPing(t *testing.T) {
	_, c := redistest.Mini(t)
	cl, err := cleanup.New(c, cleanup.WithPrefix(redistest.Prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Ping(context.Background()); err != nil {
		t.Errorf("Ping on a healthy Redis: %v", err)
	}

	dead := redistest.DeadClient(t)
	addr := dead.Options().Addr
	cl, err = cleanup.New(dead, cleanup.WithPrefix(redistest.Prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "cleanup: ping "+addr) {
		t.Errorf("Ping on a dead address = %v, want an error naming %s", err, addr)
	}
}
