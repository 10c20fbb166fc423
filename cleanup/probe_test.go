package cleanup_test

import (
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/window"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// TestProbeKeyIsKnown is the regression test for the failure policy's
// probe hash, <prefix>:{%probe}:abs:h, which a pass used to report as "not
// of the key schema": it is read as the absolute hash it is, kept while
// its unit is live and deleted once it has expired, never Foreign.
func TestProbeKeyIsKnown(t *testing.T) {
	for name, c := range map[string]func(t *testing.T) *redis.Client{
		"Mini": func(t *testing.T) *redis.Client { _, c := redistest.Mini(t); return c },
		"Real": func(t *testing.T) *redis.Client { return redistest.Real(t).Client(t) },
	} {
		t.Run(name, func(t *testing.T) {
			client := c(t)
			prefix := redistest.Prefix(t)
			at := time.UnixMilli(1_000_000_000_000)
			cfg, err := window.NewConfig(limiter.WithPrefix(prefix), limiter.WithWindow(time.Minute), limiter.WithClock(fixed(at).Now))
			if err != nil {
				t.Fatal(err)
			}
			if err := redisprov.Probe(&cfg)(ctx, client); err != nil {
				t.Fatalf("probe: %v", err)
			}
			probe := redisprov.ProbeKey(prefix, key.Absolute)
			if n, err := client.Exists(ctx, probe).Result(); err != nil || n != 1 {
				t.Fatalf("EXISTS %s = %d, %v; want the probe's hash", probe, n, err)
			}
			opts := []cleanup.Option{cleanup.WithPrefix(prefix)}
			r, err := newCleaner(t, client, append(opts, cleanup.WithDryRun(), cleanup.WithClock(fixed(at.Add(time.Second)).Now))...).Run(ctx)
			if err != nil || r.Scanned != 1 || r.Live != 1 || r.Skipped[cleanup.Foreign] != 0 || r.Deleted != 0 {
				t.Fatalf("dry run while the probe's unit is live = %+v, %v; want it live, not Foreign", r, err)
			}
			// W + B after the unit: expired, deleted like any limiter hash.
			r, err = newCleaner(t, client, append(opts, cleanup.WithClock(fixed(at.Add(time.Minute+600*time.Millisecond)).Now))...).Run(ctx)
			if err != nil || r.Deleted != 1 || r.Skipped[cleanup.Foreign] != 0 {
				t.Fatalf("Run once the probe's unit expired = %+v, %v; want it deleted", r, err)
			}
			if n := client.Exists(ctx, probe).Val(); n != 0 {
				t.Errorf("EXISTS %s = %d after the pass, want 0", probe, n)
			}
		})
	}
}
