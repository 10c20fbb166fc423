package sluicevalkey_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/valkey-io/valkey-go"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/sluicerueidis/sluicevalkey"
)

// Two calls a second per key on a valkey-go client: each key has its own
// window. The example runs on miniredis, which needs client-side caching
// off (DisableCache); against Valkey or Redis the same code works with the
// client's defaults.
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	vc, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer vc.Close() // after the limiter's Close

	l, err := redisabs.New(sluicevalkey.New(vc), limiter.WithWindow(time.Second))
	if err != nil {
		panic(err)
	}
	defer l.Close(context.Background())

	for _, user := range []string{"ann", "ann", "bob", "ann"} {
		d, err := l.Inc(context.Background(), user, limiter.PerSecond(2), 1)
		if err != nil {
			panic(err)
		}
		fmt.Println(user, d.Allowed)
	}
	// Output:
	// ann true
	// ann true
	// bob true
	// ann false
}
