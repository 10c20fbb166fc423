// Module compat runs the fleet's seams (internal/seams) on the newest
// go-redis this project is tested with: the go-redis version of a build
// is the module's, so the core's own tests certify the version its go.mod
// requires and these the one this go.mod requires. make test runs them.
package compat_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/internal/seams"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// newest is the go-redis version this module requires.
const newest = "9.23.0"

// TestGoRedisVersion: the seams below run on the newest go-redis, not on
// the core's.
func TestGoRedisVersion(t *testing.T) {
	if v := redis.Version(); !strings.HasPrefix(v, newest) {
		t.Fatalf("go-redis %s, want %s", v, newest)
	}
}

// The seams that depend on the client's version: its dialer's retries,
// its pool's redials, its notifications, its cluster topology. (The
// staleness bounds, the eviction warning and the freeze do not: the root
// package's tests cover them; the freeze passed 3 of 3 runs on this
// version too.)

func TestOutageOnset(t *testing.T)      { seams.RunOutageOnset(t) }
func TestProbeClientQuiet(t *testing.T) { seams.RunProbeClientQuiet(t) }
func TestClusterByNode(t *testing.T)    { seams.RunClusterByNode(t) }
