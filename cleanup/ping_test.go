package cleanup_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

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

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dead := redis.NewClient(&redis.Options{Addr: addr})
	defer dead.Close()
	cl, err = cleanup.New(dead, cleanup.WithPrefix(redistest.Prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "cleanup: ping "+addr) {
		t.Errorf("Ping on a dead address = %v, want an error naming %s", err, addr)
	}
}
