package limiter

// WithHotKeyRelief turns hot-key relief on or off for redisabs, redissup
// and the hybrid providers. Default on.
//
// With relief, a refusal Redis gave for n units at a rate is remembered
// until its RetryAfter, and later calls of the same key at the same rate
// for n units or more are refused from memory with the answer Redis would
// give; the suppressed strategy declines from memory only the draws Redis
// would decline. Relief never admits. It may refuse a little longer than
// needed when another instance gives units back or resets the key: turn
// it off where that happens often, or to have every call asked of Redis.
// See docs/algorithms.md, Hot-key relief.
func WithHotKeyRelief(on bool) Option {
	return func(c *config) { c.NoRelief = !on }
}
