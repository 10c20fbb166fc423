package limiter

// WithHotKeyRelief turns hot-key relief on or off for redisabs, redissup
// and the hybrid providers. Default on. With relief, a refusal Redis gave
// is remembered until its RetryAfter, and later calls of the key at the
// same rate for as many units or more are refused from memory (the
// suppressed strategy declines only the draws Redis would, and reports
// them with the key's next Redis call).
// Relief never admits, and answers only while the breaker is closed; it
// may refuse a little longer than needed when units come back unseen (a
// hybrid's unused lease, another instance's Reset). At most 65,536 keys
// per limiter are remembered. Turn it off to have every call asked of
// Redis. See docs/operations.md and docs/algorithms.md, Hot-key relief.
func WithHotKeyRelief(on bool) Option {
	return func(c *config) { c.NoRelief = !on }
}
