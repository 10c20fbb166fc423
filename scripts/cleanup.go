package scripts

// Scripts of the cleanup loop (package cleanup). Each file's header lists
// its KEYS, ARGV and reply.
var (
	// Clean is one step of the cleanup of one limiter hash of either
	// strategy: delete it when no bucket is live, give it a TTL when it has
	// none, trim its dead buckets (clean.lua).
	Clean = script("clean.lua")
	// LeaseRenew extends a lease lock for its owner only (lease_renew.lua).
	LeaseRenew = script("lease_renew.lua")
	// LeaseRelease deletes a lease lock for its owner only
	// (lease_release.lua).
	LeaseRelease = script("lease_release.lua")
)
