package sluiceotel_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
	"github.com/sluice-go/sluice/sluiceotel"
)

type nopObserver struct{}

func (nopObserver) ObserveDecision(context.Context, limiter.DecisionEvent) {}
func (nopObserver) ObserveEvent(context.Context, limiter.Event)            {}

// BenchmarkIncObserver puts an admission of the local absolute limiter on
// one hot key beside itself with a no-op observer and with this package's
// Observer on the OpenTelemetry SDK (a manual reader, collected once at
// the end), in one run:
//
//	cd sluiceotel && go test -run '^$' -bench IncObserver -benchmem -count 6 .
//
// The Redis providers pay the same observer cost per call, plus one
// time.Now and time.Since around the Redis call, against a round trip of
// tens of microseconds.
func BenchmarkIncObserver(b *testing.B) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	otelObs, err := sluiceotel.New(sluiceotel.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	defer otelObs.Close()
	rate := limiter.PerSecond(1e9)
	for _, c := range []struct {
		name string
		opts []limiter.Option
	}{
		{"none", nil},
		{"nop", []limiter.Option{limiter.WithObserver(nopObserver{})}},
		{"otel", []limiter.Option{limiter.WithObserver(otelObs)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			l, err := local.NewAbsolute(c.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close(ctx)
			l.Inc(ctx, "hot", rate, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if d, _ := l.Inc(ctx, "hot", rate, 1); !d.Allowed {
					b.Fatalf("Inc = %+v, want an admission", d)
				}
			}
		})
	}
}
