package grpclimit

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluice-go/sluice/httplimit"
)

// KeyFunc returns the limiter key of a call: the client, user or tenant
// it is counted against. ctx is the call's (its peer, its incoming
// metadata, what earlier interceptors stored); fullMethod is
// "/package.Service/Method". A call it cannot key is refused with its
// error: return a status error (status.Error) to choose the code; any
// other error is codes.Internal, its text not shown. A KeyFunc must be
// safe for concurrent use.
type KeyFunc func(ctx context.Context, fullMethod string) (string, error)

// KeyByIP keys a call by its peer's address, trusting no metadata, by the
// rules of httplimit.KeyByIP: "ip:192.0.2.7" for IPv4 (an IPv4-mapped
// IPv6 peer counts as its IPv4 address), "ip:2001:db8:1:2::/64" for IPv6,
// and an IPv6 address that embeds an IPv4 client (NAT64, Teredo) by that
// client. It is the interceptor's default KeyFunc. Behind a proxy every
// call comes from the proxy: use KeyByIPKey with httplimit.TrustProxies.
var KeyByIP KeyFunc = KeyByIPKey(nil)

// KeyByIPKey returns a KeyFunc that keys a call by k.KeyAddr of the
// peer's address (peer.FromContext) and of the metadata that carries k's
// trusted header (k.Header in lower case: "x-forwarded-for",
// "forwarded" or "x-real-ip"), read only when the peer is one of k's
// trusted proxies. The rules are package httplimit's (docs/http.md, Keys
// and their trade-offs): IPv6 by /64, IPv4-mapped and NAT64 forms by the
// IPv4 client, a forwarded chain walked from the right. A nil k trusts no
// proxy. A call whose peer has no IP address (a Unix socket, an
// in-memory listener) is refused with codes.Internal: key such a server
// by something else.
func KeyByIPKey(k *httplimit.IPKey) KeyFunc {
	if k == nil {
		k = &httplimit.IPKey{}
	}
	mdKey := strings.ToLower(k.Header())
	return func(ctx context.Context, _ string) (string, error) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return "", status.Error(codes.Internal, "sluice: the call has no peer address")
		}
		var vs []string
		if mdKey != "" {
			md, _ := metadata.FromIncomingContext(ctx)
			vs = md[mdKey]
		}
		return k.KeyAddr(p.Addr.String(), vs)
	}
}

// KeyByMetadata returns a KeyFunc that keys a call by the first value of
// the metadata key name ("x-api-key"), as "<name in lower case>:<value>".
// A call without it, or with an empty value, is refused with
// codes.InvalidArgument.
//
// Metadata is whatever the client sends: key by it only when the value is
// checked before the limiter (an API key an earlier interceptor
// verified), or when the limit is a courtesy the client may spread over
// many values.
func KeyByMetadata(name string) KeyFunc {
	name = strings.ToLower(name)
	prefix := name + ":"
	return func(ctx context.Context, _ string) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		vs := md[name]
		if len(vs) == 0 || strings.TrimSpace(vs[0]) == "" {
			return "", status.Error(codes.InvalidArgument, "sluice: missing metadata "+name)
		}
		return prefix + strings.TrimSpace(vs[0]), nil
	}
}

// KeyFromContext returns a KeyFunc that keys a call by the identity an
// earlier interceptor (the authentication) stored in its context under
// ctxKey, as "<name>:<value>". The value must be a non-empty string or a
// fmt.Stringer that returns one; a call without it is refused with
// codes.Unauthenticated, so chain the limiter after the authentication.
// For an identity in the transport's credentials (a client certificate:
// peer.FromContext(ctx).AuthInfo is a credentials.TLSInfo), write a
// KeyFunc that reads it; docs/grpc.md shows one.
func KeyFromContext(name string, ctxKey any) KeyFunc {
	prefix := name + ":"
	return func(ctx context.Context, _ string) (string, error) {
		var s string
		switch v := ctx.Value(ctxKey).(type) {
		case string:
			s = v
		case fmt.Stringer:
			s = v.String()
		}
		if s == "" {
			return "", status.Error(codes.Unauthenticated, "sluice: no "+name+" in the call")
		}
		return prefix + s, nil
	}
}

// PerMethod returns a KeyFunc that gives each method its own count: the
// key is the full method name, '|' and f's key
// ("/shop.Cart/Checkout|ip:192.0.2.7"). Without it, every method of a
// client shares the client's count, whatever rate each method is given.
// f's refusals are PerMethod's.
func PerMethod(f KeyFunc) KeyFunc {
	return func(ctx context.Context, fullMethod string) (string, error) {
		k, err := f(ctx, fullMethod)
		if err != nil {
			return "", err
		}
		return fullMethod + "|" + k, nil
	}
}
