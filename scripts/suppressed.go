package scripts

// Scripts of the suppressed strategy (limiter/redissup). Each file's header
// lists its KEYS, ARGV and reply.
var (
	// SupInc is one suppressed Inc: decide, record, cache the factor,
	// PEXPIRE the hash (sup_inc.lua). A peek (n = 0) writes nothing.
	SupInc = script("sup_inc.lua")
	// SupAllowed is the read-only IsAllowed (sup_allowed.lua).
	SupAllowed = script("sup_allowed.lua")
	// SupGet is the read-only usage query (sup_get.lua).
	SupGet = script("sup_get.lua")
)

// Scripts of a set of suppressed limits on one key (limiter/redissup's
// IncSet and GetSet): one hash per limit, all in the key's slot.
var (
	// SupSet decides one suppressed call on a set of up to eight limits
	// as one: every limit's factor as SupInc computes it, admitted when
	// the draw is at or above the largest, the offer recorded in every
	// limit (sup_set.lua). A peek (n = 0) writes nothing.
	SupSet = script("sup_set.lua")
	// SupSetGet is the read-only usage of each limit of a set
	// (sup_set_get.lua).
	SupSetGet = script("sup_set_get.lua")
)
