package limiter

// WithHotKeyRelief turns hot-key relief on or off for redisabs, redissup
// and the hybrid providers. Default on.
//
// With relief, a refusal Redis gave for n units at a rate is remembered
// until its RetryAfter: later calls of the same key at the same rate for n
// units or more are refused from memory, with RetryAfter and ResetAfter
// counting down from Redis's answer and its Remaining, since no call can
// fit before then unless units are given back. A call at another rate
// goes to Redis, and Reset through the same limiter forgets the key. The
// suppressed strategy declines from memory only the draws Redis would
// decline with the factor it gave, and reports those declines with the
// key's next Redis call. Identical concurrent IsAllowed calls on one key
// share one round trip. Relief never admits: it answers only refusals,
// and only while the breaker is closed (an open breaker leaves every call
// to the failure policy). It can refuse a little longer than needed when
// units come back before the RetryAfter: a hybrid instance gives back an
// unused lease, or another instance resets the key. Memory is bounded:
// at most 65,536 keys per limiter, each dropped once its RetryAfter has
// passed. See docs/algorithms.md, Hot-key relief.
//
// Turn it off to have every call asked of Redis (a benchmark's unrelieved
// contender, or a fleet that resets keys often from other instances).
func WithHotKeyRelief(on bool) Option {
	return func(c *config) { c.NoRelief = !on }
}
