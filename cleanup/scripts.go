package cleanup

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The cleaner's scripts. Each file's header lists its KEYS, ARGV and reply.
var (
	//go:embed clean.lua
	cleanLua string
	//go:embed lease_renew.lua
	leaseRenewLua string
	//go:embed lease_release.lua
	leaseReleaseLua string

	// cleanScript is one step of the cleanup of one limiter hash.
	cleanScript = redis.NewScript(cleanLua)
	// renewScript extends the lease lock for its owner only.
	renewScript = redis.NewScript(leaseRenewLua)
	// releaseScript deletes the lease lock for its owner only.
	releaseScript = redis.NewScript(leaseReleaseLua)
)
