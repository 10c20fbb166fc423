package scripts

// Scripts of the suppressed strategy (limiter/redissup).
var (
	// SupInc is one suppressed Inc: decide, record, cache the factor,
	// PEXPIRE the hash (sup_inc.lua). A peek (n = 0) writes nothing.
	SupInc = script("sup_inc.lua")
	// SupAllowed is the read-only IsAllowed (sup_allowed.lua).
	SupAllowed = script("sup_allowed.lua")
	// SupGet is the read-only usage query (sup_get.lua).
	SupGet = script("sup_get.lua")
	// SupSet decides one suppressed call on a set of up to eight limits
	// of one key as one: admitted when the draw is at or above the largest
	// factor, the offer recorded in every limit (sup_set.lua). A peek
	// (n = 0) writes nothing.
	SupSet = script("sup_set.lua")
	// SupSetGet is the read-only usage of each limit of a set
	// (sup_set_get.lua).
	SupSetGet = script("sup_set_get.lua")
)
