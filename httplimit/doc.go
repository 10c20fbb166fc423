// Package httplimit is HTTP middleware around sluice's limiters: it keys
// each request (by client address, header, authenticated user or a
// composition), asks the limiter, and answers a refusal with 429, an exact
// Retry-After and the IETF RateLimit headers.
//
//	l, _ := local.NewAbsolute(limiter.WithWindow(time.Minute))
//	mw, err := httplimit.New(l, limiter.Limit{Rate: limiter.PerMinute(100)})
//	...
//	http.ListenAndServe(":8080", mw.Handler(mux))
//
// Middleware.Handler has the shape func(http.Handler) http.Handler, so it
// mounts unchanged in net/http, chi (r.Use(mw.Handler)), gorilla/mux and
// alice chains. docs/http.md shows gin and echo too.
//
// # Keys
//
// The default key is the immediate peer's address (KeyByIP): no header is
// trusted, because any client can send X-Forwarded-For. Behind proxies,
// NewIPKey with TrustProxies names the proxies' addresses and the one
// header they set; the header is read only when the peer is one of them,
// from the right, skipping trusted hops, so the client's own entries can
// never choose its key. IPv6 clients are grouped by /64 (IPv6Prefix), and
// an IPv4-mapped IPv6 address is its IPv4 address. KeyByHeader,
// KeyFromContext, Static and Compose cover API keys, authenticated users
// and per-route limits. A KeyFunc refuses a request it cannot key with a
// *KeyError, which carries the status.
//
// # Exempt requests
//
// OPTIONS requests (CORS preflights, which browsers send on their own) are
// not counted; WithSkipMethods changes the exempt methods, WithSkip exempts
// by any test (health checks), and WithAllowKeys exempts keys.
//
// # Responses
//
// Every limited response carries, as draft-ietf-httpapi-ratelimit-headers-10
// specifies, one item per limit (a single limit is a one-item policy named
// DefaultPolicyName unless the Limit has a Name):
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=0;t=12
//
// q is the capacity (soft capacity for the suppressed strategy), w the
// window in seconds (left out when the window is not a whole number of
// seconds), r the units remaining, and t the seconds until the refused
// request would fit (RetryAfter rounded up) or, when it fits now, until the
// window is empty (ResetAfter rounded up). A refusal adds Retry-After:
// RetryAfter in whole seconds, rounded up, so a client that waits it is
// admitted if nothing else came; a request larger than the capacity
// (Decision.Never) gets no Retry-After, since no wait helps.
// WithLegacyHeaders adds X-RateLimit-Limit, -Remaining and -Reset.
//
// # Failures
//
// Nothing here panics on a request. A request that cannot be keyed, a
// failing rate, set or cost function, and a limiter error (a Redis
// provider under limiter.FailError while Redis is down) go to the error
// handler, 503 by default; under the other failure policies the provider
// answers a Decision with Degraded set and the middleware serves it like
// any other.
package httplimit
