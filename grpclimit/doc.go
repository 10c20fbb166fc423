// Package grpclimit is a gRPC server interceptor around sluice's limiters:
// it keys each call (by peer address, metadata, authenticated identity or
// a function of your own), asks the limiter, and answers a refusal with
// codes.ResourceExhausted, a google.rpc.RetryInfo detail whose
// retry_delay is the decision's exact RetryAfter, and the IETF RateLimit
// fields as metadata.
//
//	l, _ := local.NewAbsolute(limiter.WithWindow(time.Minute))
//	lim, err := grpclimit.New(l, limiter.Limit{Rate: limiter.PerMinute(100)})
//	...
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(lim.Unary),
//		grpc.ChainStreamInterceptor(lim.Stream),
//	)
//
// NewSet limits each key to a set of limits (10 per second and 1,000 per
// day), WithRateFunc and WithSetFunc choose the rate or set per call (by
// method or by tenant), and PerMethod gives each method its own count.
//
// Keys: the default is the peer's address (KeyByIP), trusting no
// metadata, with the client-address rules of package httplimit (IPv6 by
// /64, IPv4-mapped and NAT64 addresses by the IPv4 client). Behind
// proxies, KeyByIPKey with an httplimit.IPKey that trusts them reads
// x-forwarded-for (or forwarded, x-real-ip) only from those proxies.
// KeyByMetadata keys by an API key, KeyFromContext by the identity an
// authentication interceptor stored. A call that cannot be keyed is
// refused.
//
// Every decided call carries the metadata ratelimit-policy and ratelimit,
// with the values httplimit writes in its RateLimit-Policy and RateLimit
// headers for the same decision: in the header metadata, and in the
// trailer too when refused. The health service and server reflection are
// exempt by default (WithSkipMethods).
//
// A stream is charged once, when it opens; WithMessageCharge charges each
// message the client sends as well. When the limiter returns an error (a
// Redis provider under limiter.FailError while Redis is down), the call
// goes through and the error is logged by default; WithErrorHandler
// chooses otherwise (RefuseOnError). docs/grpc.md has the details and
// examples per client and per tenant.
package grpclimit
