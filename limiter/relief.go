package limiter

// WithHotKeyRelief turns hot-key relief on or off for redisabs, redissup
// and the hybrid providers. Default on. With relief, a refusal Redis gave
// is remembered until its RetryAfter (at most 65,536 keys per limiter),
// and later calls of the key at the same rate for as many units or more
// are refused from memory. Relief never admits; it may refuse a little
// longer than needed when units come back unseen (a hybrid's unused
// lease, another instance's Reset). See docs/algorithms.md, Hot-key relief.
func WithHotKeyRelief(on bool) Option {
	return func(c *config) { c.NoRelief = !on }
}
