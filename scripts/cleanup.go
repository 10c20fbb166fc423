package scripts

import (
	_ "embed" // the .lua files

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed clean.lua
	cleanSrc string
	//go:embed lease_renew.lua
	leaseRenewSrc string
	//go:embed lease_release.lua
	leaseReleaseSrc string
)

// Scripts of the cleanup loop (package cleanup). Each file's header lists
// its KEYS, ARGV and reply.
var (
	// Clean is one step of the cleanup of one limiter hash of either
	// strategy: delete it when no bucket is live, give it a TTL when it has
	// none, trim its dead buckets (clean.lua).
	Clean = redis.NewScript(cleanSrc)
	// LeaseRenew extends a lease lock for its owner only (lease_renew.lua).
	LeaseRenew = redis.NewScript(leaseRenewSrc)
	// LeaseRelease deletes a lease lock for its owner only
	// (lease_release.lua).
	LeaseRelease = redis.NewScript(leaseReleaseSrc)
)
