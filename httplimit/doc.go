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
// mounts unchanged in net/http, chi, gorilla/mux and alice chains.
//
// The default key is the immediate peer's address (KeyByIP): no header is
// trusted, as any client can send X-Forwarded-For; behind proxies, use
// NewIPKey with TrustProxies. A request that can never fit gets 413 and no
// Retry-After; a request that cannot be keyed, or a limiter error, goes to
// the error handler, 503 by default. docs/http.md has the keys' trade-offs,
// the headers in detail and the frameworks (gin, echo).
package httplimit
