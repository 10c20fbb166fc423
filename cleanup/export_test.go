package cleanup

// SetHooks installs the test hooks of c: pause runs before each key, before
// the lease is checked (a test stalls the cleaner there); inKey wraps the
// handling of each key that the lease allowed.
func SetHooks(c *Cleaner, pause func(), inKey func(redisKey string) func()) {
	c.pause, c.inKey = pause, inKey
}

// LeaseKey returns the Redis key of c's lease lock.
func LeaseKey(c *Cleaner) string { return c.lease.key }
