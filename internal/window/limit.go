package window

import (
	"fmt"
	"time"

	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// ResolveLimit is the single limit a middleware (httplimit, grpclimit)
// enforces with l: Name defaults to defaultName and must be a valid limit
// name; Window 0 takes the window l reports (a Window() time.Duration
// method, which every sluice provider has), a different one is an error,
// and a limiter that reports none must be given its window, at least
// 1 ms. Every error wraps limiter.ErrInvalidConfig.
func ResolveLimit(l limiter.Limiter, limit limiter.Limit, defaultName string) (limiter.Limit, error) {
	if limit.Name == "" {
		limit.Name = defaultName
	}
	if err := key.ValidateLimitName(limit.Name); err != nil {
		return limit, fmt.Errorf("%w: limit name: %w", limiter.ErrInvalidConfig, err)
	}
	if w, ok := l.(interface{ Window() time.Duration }); ok {
		switch lw := w.Window(); {
		case limit.Window == 0:
			limit.Window = lw
		case limit.Window != lw:
			return limit, fmt.Errorf("%w: limit %q: window %v differs from the limiter's window %v (leave Limit.Window 0 to use the limiter's)", limiter.ErrInvalidConfig, limit.Name, limit.Window, lw)
		}
	}
	if limit.Window < time.Millisecond {
		return limit, fmt.Errorf("%w: limit %q: window %v (this limiter does not report its window: give Limit.Window, the window it was built with, at least 1ms)", limiter.ErrInvalidConfig, limit.Name, limit.Window)
	}
	return limit, nil
}
