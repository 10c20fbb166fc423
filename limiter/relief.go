package limiter

import "github.com/sluice-go/sluice/internal/settings"

// WithHotKeyRelief turns hot-key relief on or off for redisabs, redissup
// and the hybrid providers. Default on. With relief, a refusal Redis gave
// is remembered until its RetryAfter (at most 65,536 keys per limiter),
// and later calls of the key at the same rate for as many units or more
// are refused from memory, for at most one second after Redis's answer:
// then one call asks Redis again (one call a second per refused key per
// instance). Relief never admits; when units come back unseen (another
// instance's or redis-cli's Reset, a hybrid's given-back lease, a higher
// rate stored elsewhere) it may go on refusing for up to that second.
// Memory counts time on the limiter's clock: a test that moves miniredis'
// clock (SetTime, FastForward) must give the limiter the same clock
// (WithClock), or the refusals it remembers wait for up to a second of
// wall time. See docs/algorithms.md, Staleness, and docs/testing-your-code.md.
func WithHotKeyRelief(on bool) Option {
	return func(c *config) {
		c.Record(settings.OptHotKeyRelief)
		c.NoRelief = !on
	}
}
