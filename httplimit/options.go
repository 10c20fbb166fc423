package httplimit

import (
	"net/http"
	"strings"

	"github.com/sluice-go/sluice/limiter"
)

// Option configures a Middleware.
type Option func(*config)

type config struct {
	key     KeyFunc
	rateFn  func(*http.Request) (limiter.Rate, error)
	setFn   func(*http.Request) (*limiter.Set, error)
	cost    func(*http.Request) (int64, error)
	skip    func(*http.Request) bool
	methods []string // exempt methods; nil: OPTIONS alone
	allow   []string
	legacy  bool
	onDeny  DenyFunc
	onError ErrorFunc
}

// WithKey sets how a request is keyed. Default KeyByIP.
func WithKey(f KeyFunc) Option { return func(c *config) { c.key = f } }

// WithRateFunc sets a per-request rate for New: f's rate replaces the
// limit's Rate, over the limiter's window. An error goes to the error
// handler. Not for NewSet.
func WithRateFunc(f func(*http.Request) (limiter.Rate, error)) Option {
	return func(c *config) { c.rateFn = f }
}

// WithSetFunc sets a per-request set of limits for NewSet. Build each
// tier's Set once and return it: a set the middleware was not built with
// costs a few allocations to describe in the headers. An error goes to the
// error handler. Not for New.
func WithSetFunc(f func(*http.Request) (*limiter.Set, error)) Option {
	return func(c *config) { c.setFn = f }
}

// WithCost sets a per-request cost in units. Default 1. 0 is a peek:
// decided for one unit, nothing recorded. A negative cost or an error goes
// to the error handler.
func WithCost(f func(*http.Request) (int64, error)) Option {
	return func(c *config) { c.cost = f }
}

// WithSkip sets a function that exempts a request (health checks): it
// goes to the next handler with no key, limiter call or header. Default:
// none.
func WithSkip(f func(*http.Request) bool) Option { return func(c *config) { c.skip = f } }

// WithSkipMethods sets the methods exempt as with WithSkip, compared in
// upper case. Default OPTIONS alone: a browser sends a CORS preflight
// before a cross-origin request, and a refused preflight shows as a CORS
// failure. WithSkipMethods() counts every method. New reports an empty
// method as limiter.ErrInvalidConfig.
func WithSkipMethods(methods ...string) Option {
	return func(c *config) {
		c.methods = make([]string, len(methods)) // not nil: set
		for i, m := range methods {
			c.methods[i] = strings.ToUpper(m)
		}
	}
}

// WithAllowKeys exempts requests whose key (as the KeyFunc returns it,
// "ip:10.0.0.7") is one of keys: no limiter call, no header. Default: none.
func WithAllowKeys(keys ...string) Option {
	return func(c *config) { c.allow = append(c.allow, keys...) }
}

// WithLegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset (Unix seconds, rounded up, of the RateLimit header's
// t) of the limit with the fewest units remaining. Default off.
func WithLegacyHeaders() Option { return func(c *config) { c.legacy = true } }

// WithDenyHandler replaces DefaultDeny, the response to a refused request.
func WithDenyHandler(f DenyFunc) Option { return func(c *config) { c.onDeny = f } }

// WithErrorHandler replaces DefaultError, the response to a request that
// could not be decided.
func WithErrorHandler(f ErrorFunc) Option { return func(c *config) { c.onError = f } }
