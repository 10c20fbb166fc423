package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	sconfig "github.com/sluice-go/sluice/internal/config"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// DefaultPolicyName is the policy name of a single limit whose Name is
// empty, in the RateLimit-Policy and RateLimit headers.
const DefaultPolicyName = "default"

// Canonical header keys, written to the header map directly (no
// canonicalisation per request).
const (
	hPolicy     = "Ratelimit-Policy"
	hRateLimit  = "Ratelimit"
	hRetryAfter = "Retry-After"
	hLimit      = "X-Ratelimit-Limit"
	hRemaining  = "X-Ratelimit-Remaining"
	hReset      = "X-Ratelimit-Reset"
)

// Result is what the middleware decided for a refused request, given to
// the DenyFunc.
type Result struct {
	// Key is the limiter key of the request.
	Key string
	// Cost is the units the request asked for.
	Cost int64
	// SetDecision is the limiter's answer. A single limit is a set of one:
	// Limits holds one LimitDecision named after the limit.
	limiter.SetDecision
}

// DenyFunc writes the response to a refused request. When it is called,
// the Retry-After, RateLimit-Policy and RateLimit headers (and the legacy
// ones, when enabled) are already set on w. It must not keep res.
type DenyFunc func(w http.ResponseWriter, r *http.Request, res *Result)

// ErrorFunc writes the response to a request that could not be decided:
// its KeyFunc refused it (err matches ErrNoKey and is a *KeyError), a rate,
// set or cost function failed, or the limiter returned an error (a Redis
// provider under the FailError policy while Redis is down: err matches
// limiter.ErrUnavailable or is Redis's error). No rate-limit header is set.
type ErrorFunc func(w http.ResponseWriter, r *http.Request, err error)

// DefaultDeny writes 429 Too Many Requests in plain text, or 413 Content
// Too Large for a request whose cost is above a limit's capacity
// (Decision.Never): no wait admits it, so it is not a retry.
func DefaultDeny(w http.ResponseWriter, _ *http.Request, res *Result) {
	status := http.StatusTooManyRequests
	if res != nil && res.Never {
		status = http.StatusRequestEntityTooLarge
	}
	http.Error(w, http.StatusText(status), status)
}

// DefaultError writes a *KeyError's status and reason in plain text, and
// 503 Service Unavailable for every other error (its text is not shown:
// it may name servers).
func DefaultError(w http.ResponseWriter, _ *http.Request, err error) {
	var ke *KeyError
	if errors.As(err, &ke) {
		http.Error(w, ke.Reason, ke.Status)
		return
	}
	http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
}

// Option configures a Middleware.
type Option func(*config)

type config struct {
	key     KeyFunc
	rateFn  func(*http.Request) (limiter.Rate, error)
	setFn   func(*http.Request) (*limiter.Set, error)
	cost    func(*http.Request) (int64, error)
	skip    func(*http.Request) bool
	methods []string // exempt methods; nil until set means DefaultSkipMethods
	setM    bool
	allow   []string
	legacy  bool
	onDeny  DenyFunc
	onError ErrorFunc
}

// WithKey sets how a request is keyed. Default KeyByIP: the immediate
// peer's address, no header trusted, IPv6 grouped by /64.
func WithKey(f KeyFunc) Option { return func(c *config) { c.key = f } }

// WithRateFunc sets a per-request rate (the tier lookup) for a single
// limit (New): f's rate replaces the limit's Rate for the request, over
// the limiter's window. An error goes to the error handler. Not for
// NewSet.
func WithRateFunc(f func(*http.Request) (limiter.Rate, error)) Option {
	return func(c *config) { c.rateFn = f }
}

// WithSetFunc sets a per-request set of limits (the tier lookup) for
// NewSet. Build each tier's Set once and return it: a set the middleware
// was not built with costs a few allocations to describe in the headers.
// An error goes to the error handler. Not for New.
func WithSetFunc(f func(*http.Request) (*limiter.Set, error)) Option {
	return func(c *config) { c.setFn = f }
}

// WithCost sets a per-request cost in units. Default 1 for every request.
// 0 is a peek: decided for one unit, nothing recorded. A negative cost or
// an error goes to the error handler.
func WithCost(f func(*http.Request) (int64, error)) Option {
	return func(c *config) { c.cost = f }
}

// WithSkip sets a function that exempts a request (health checks,
// metrics): it goes to the next handler without a key, a limiter call or a
// header. Default: none. WithSkipMethods exempts by method (OPTIONS by
// default).
func WithSkip(f func(*http.Request) bool) Option { return func(c *config) { c.skip = f } }

// WithSkipMethods sets the request methods that are exempt from the limit:
// a request of one of them goes to the next handler without a key, a
// limiter call or a header, as with WithSkip. Methods are compared in
// upper case ("head" is HEAD). Default: OPTIONS alone. A browser sends a
// CORS preflight (OPTIONS) on its own before a cross-origin request, so
// counting it would charge a client twice for one call, and a refused
// preflight comes back without CORS headers, which the browser reports as
// a CORS failure instead of a rate limit; the request the preflight
// announces is limited as usual. WithSkipMethods() with no method counts
// every method, OPTIONS included; WithSkipMethods(http.MethodOptions,
// http.MethodHead) exempts HEAD too.
func WithSkipMethods(methods ...string) Option {
	return func(c *config) {
		c.methods, c.setM = make([]string, len(methods)), true
		for i, m := range methods {
			c.methods[i] = strings.ToUpper(m)
		}
	}
}

// WithAllowKeys exempts requests whose key (as the KeyFunc returns it,
// "ip:10.0.0.7") is one of keys: they go to the next handler with no
// limiter call and no header. Default: none.
func WithAllowKeys(keys ...string) Option {
	return func(c *config) { c.allow = append(c.allow, keys...) }
}

// WithLegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset to every limited response: the capacity, the units
// remaining and the Unix time in seconds (rounded up) of the RateLimit
// header's t, of the limit with the fewest units remaining. Default off:
// clients should read RateLimit.
func WithLegacyHeaders() Option { return func(c *config) { c.legacy = true } }

// WithDenyHandler replaces DefaultDeny, the response to a refused request.
func WithDenyHandler(f DenyFunc) Option { return func(c *config) { c.onDeny = f } }

// WithErrorHandler replaces DefaultError, the response to a request that
// could not be decided.
func WithErrorHandler(f ErrorFunc) Option { return func(c *config) { c.onError = f } }

// Middleware limits the requests of an http.Handler. Build one with New
// (a single limit) or NewSet (a set of limits); it is immutable and safe
// for concurrent use. Its Handler method is a func(http.Handler)
// http.Handler, the middleware shape of net/http, chi, gorilla/mux and
// alice. The zero Middleware limits nothing: it answers every request
// 500.
type Middleware struct {
	cfg config

	// single limit
	one      limiter.Limiter
	name     string
	rate     limiter.Rate
	window   time.Duration
	capacity int64 // of rate; 0 when rate is the zero Rate

	// set of limits
	many limiter.SetLimiter
	set  *limiter.Set

	policy string // RateLimit-Policy of rate or set
	allow  map[string]struct{}
}

// New returns a middleware that limits each key to limit on l: at most
// limit.Rate × W units in any span of W, where W is l's window, stated in
// the w parameter of RateLimit-Policy. Every sluice provider reports its
// window (a Window() time.Duration method), so leave limit.Window 0; a limit.Window that
// differs from the provider's is an error, since the headers would promise
// a window the limiter does not enforce. A Limiter that is not
// without that method (one of your own) must be given its window in
// limit.Window. limit.Name names the policy in the headers ("" means
// DefaultPolicyName) and follows the rules of limiter.Limit's Name.
// limit.Rate may be the zero Rate only with WithRateFunc. limit.Bucket is
// ignored (it is l's). Errors match limiter.ErrInvalidConfig, or the
// rate's errors.
func New(l limiter.Limiter, limit limiter.Limit, opts ...Option) (*Middleware, error) {
	m, err := newMiddleware(opts)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, fmt.Errorf("%w: httplimit.New with a nil limiter", limiter.ErrInvalidConfig)
	}
	if m.cfg.setFn != nil {
		return nil, fmt.Errorf("%w: WithSetFunc is for NewSet; New takes WithRateFunc", limiter.ErrInvalidConfig)
	}
	if limit.Name == "" {
		limit.Name = DefaultPolicyName
	}
	if err := key.ValidateLimitName(limit.Name); err != nil {
		return nil, fmt.Errorf("%w: limit name: %w", limiter.ErrInvalidConfig, err)
	}
	if w, ok := l.(interface{ Window() time.Duration }); ok {
		switch lw := w.Window(); {
		case limit.Window == 0:
			limit.Window = lw
		case limit.Window != lw:
			return nil, fmt.Errorf("%w: limit %q: window %v differs from the limiter's window %v (leave Limit.Window 0 to use the limiter's)", limiter.ErrInvalidConfig, limit.Name, limit.Window, lw)
		}
	}
	if limit.Window < time.Millisecond {
		return nil, fmt.Errorf("%w: limit %q: window %v (this limiter does not report its window: give Limit.Window, the window it was built with, at least 1ms)", limiter.ErrInvalidConfig, limit.Name, limit.Window)
	}
	m.one, m.name, m.rate, m.window = l, limit.Name, limit.Rate, limit.Window
	if limit.Rate != (limiter.Rate{}) || m.cfg.rateFn == nil {
		c, err := limiter.Capacity(limit.Rate, limit.Window)
		if err != nil {
			return nil, fmt.Errorf("limit %q: %w", limit.Name, err)
		}
		m.capacity = c
		m.policy = string(appendPolicy(nil, m.name, c, m.window))
	}
	return m, nil
}

// NewSet returns a middleware that limits each key to every limit of set
// on l: a request is admitted only when every limit has room for it. The
// headers have one item per limit, named by Limit.Name, in the set's
// order. set may be nil only with WithSetFunc. Errors match
// limiter.ErrInvalidConfig.
func NewSet(l limiter.SetLimiter, set *limiter.Set, opts ...Option) (*Middleware, error) {
	m, err := newMiddleware(opts)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, fmt.Errorf("%w: httplimit.NewSet with a nil limiter", limiter.ErrInvalidConfig)
	}
	if m.cfg.rateFn != nil {
		return nil, fmt.Errorf("%w: WithRateFunc is for New; NewSet takes WithSetFunc", limiter.ErrInvalidConfig)
	}
	if set != nil || m.cfg.setFn == nil {
		if err := sconfig.CheckSet(set); err != nil {
			return nil, err
		}
		m.policy = string(appendSetPolicy(nil, set))
	}
	m.many, m.set = l, set
	return m, nil
}

func newMiddleware(opts []Option) (*Middleware, error) {
	m := &Middleware{}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: a nil Option", limiter.ErrInvalidConfig)
		}
		o(&m.cfg)
	}
	if m.cfg.key == nil {
		m.cfg.key = KeyByIP
	}
	if m.cfg.onDeny == nil {
		m.cfg.onDeny = DefaultDeny
	}
	if m.cfg.onError == nil {
		m.cfg.onError = DefaultError
	}
	if !m.cfg.setM {
		m.cfg.methods = []string{http.MethodOptions}
	}
	for _, meth := range m.cfg.methods {
		if meth == "" {
			return nil, fmt.Errorf("%w: WithSkipMethods with an empty method", limiter.ErrInvalidConfig)
		}
	}
	if len(m.cfg.allow) > 0 {
		m.allow = make(map[string]struct{}, len(m.cfg.allow))
		for _, k := range m.cfg.allow {
			m.allow[k] = struct{}{}
		}
	}
	return m, nil
}

// Handler returns next behind the limiter.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	c := &m.cfg
	if m.one == nil && m.many == nil {
		http.Error(w, "httplimit: a Middleware not built by New or NewSet", http.StatusInternalServerError)
		return
	}
	if (c.skip != nil && c.skip(r)) || slices.Contains(c.methods, r.Method) {
		next.ServeHTTP(w, r)
		return
	}
	k, err := c.key(r)
	if err == nil {
		switch {
		case k == "":
			err = &KeyError{Status: http.StatusInternalServerError, Reason: "the key function returned an empty key"}
		case len(k) > key.MaxLen:
			err = &KeyError{Status: http.StatusBadRequest, Reason: "the request's key is longer than " + strconv.Itoa(key.MaxLen) + " bytes"}
		}
	}
	if err != nil {
		c.onError(w, r, err)
		return
	}
	if m.allow != nil {
		if _, ok := m.allow[k]; ok {
			next.ServeHTTP(w, r)
			return
		}
	}
	n := int64(1)
	if c.cost != nil {
		if n, err = c.cost(r); err == nil && n < 0 {
			err = fmt.Errorf("%w: the cost function returned %d", limiter.ErrInvalidCost, n)
		}
		if err != nil {
			c.onError(w, r, err)
			return
		}
	}
	if m.one != nil {
		m.serveOne(w, r, next, k, n)
	} else {
		m.serveSet(w, r, next, k, n)
	}
}

func (m *Middleware) serveOne(w http.ResponseWriter, r *http.Request, next http.Handler, k string, n int64) {
	rate := m.rate
	if m.cfg.rateFn != nil {
		var err error
		if rate, err = m.cfg.rateFn(r); err != nil {
			m.cfg.onError(w, r, err)
			return
		}
	}
	d, err := m.one.Inc(r.Context(), k, rate, n)
	if err != nil {
		m.cfg.onError(w, r, err)
		return
	}
	policy := m.policy
	if d.Limit != m.capacity || policy == "" {
		policy = string(appendPolicy(nil, m.name, d.Limit, m.window))
	}
	var buf [128]byte
	item := string(appendOneItem(buf[:0], m.name, &d))
	m.writeHeaders(w, policy, item, &d)
	if d.Allowed {
		next.ServeHTTP(w, r)
		return
	}
	res := &Result{Key: k, Cost: n, SetDecision: limiter.SetDecision{Decision: d, Limits: []limiter.LimitDecision{{
		Name:              m.name,
		Limit:             d.Limit,
		Remaining:         d.Remaining,
		RetryAfter:        d.RetryAfter,
		ResetAfter:        d.ResetAfter,
		SuppressionFactor: d.SuppressionFactor,
		Refused:           true,
		Never:             d.Never,
	}}}}
	m.cfg.onDeny(w, r, res)
}

func (m *Middleware) serveSet(w http.ResponseWriter, r *http.Request, next http.Handler, k string, n int64) {
	set, policy := m.set, m.policy
	if m.cfg.setFn != nil {
		var err error
		if set, err = m.cfg.setFn(r); err == nil {
			err = sconfig.CheckSet(set)
		}
		if err != nil {
			m.cfg.onError(w, r, err)
			return
		}
		if set != m.set {
			policy = string(appendSetPolicy(nil, set))
		}
	}
	d, err := m.many.IncSet(r.Context(), k, set, n)
	if err != nil {
		m.cfg.onError(w, r, err)
		return
	}
	var buf [512]byte
	m.writeHeaders(w, policy, string(appendSetItems(buf[:0], &d)), &d.Decision)
	if d.Allowed {
		next.ServeHTTP(w, r)
		return
	}
	m.cfg.onDeny(w, r, &Result{Key: k, Cost: n, SetDecision: d})
}

// writeHeaders sets the RateLimit headers, the legacy ones when enabled
// and, on a refusal that waiting can cure, Retry-After; all the values'
// slices come from one allocation, each capped so an Add elsewhere
// reallocates instead of writing over its neighbour.
func (m *Middleware) writeHeaders(w http.ResponseWriter, policy, item string, d *limiter.Decision) {
	h := w.Header()
	nv := 2
	if m.cfg.legacy {
		nv += 3
	}
	retry := !d.Allowed && !d.Never
	if retry {
		nv++
	}
	vs := make([]string, nv)
	vs[0], vs[1] = policy, item
	h[hPolicy], h[hRateLimit] = vs[0:1:1], vs[1:2:2]
	i := 2
	if m.cfg.legacy {
		t := reset(d.RetryAfter, d.ResetAfter)
		vs[2] = strconv.FormatInt(d.Limit, 10)
		vs[3] = strconv.FormatInt(d.Remaining, 10)
		vs[4] = strconv.FormatInt(time.Now().Unix()+t, 10)
		h[hLimit], h[hRemaining], h[hReset] = vs[2:3:3], vs[3:4:4], vs[4:5:5]
		i = 5
	}
	if retry {
		vs[i] = strconv.FormatInt(ceilSeconds(d.RetryAfter), 10)
		h[hRetryAfter] = vs[i : i+1 : i+1]
	}
}

// reset is the t parameter of a limit: the seconds until the refused
// request would fit (RetryAfter, rounded up), or, when it fits now or
// never will, until the window holds nothing (ResetAfter, rounded up).
func reset(retryAfter, resetAfter time.Duration) int64 {
	if retryAfter > 0 {
		return ceilSeconds(retryAfter)
	}
	return ceilSeconds(resetAfter)
}

// ceilSeconds rounds d up to whole seconds; 0 for d ≤ 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// maxSFInteger is the largest Integer a structured field can carry
// (RFC 9651 §3.3.1: at most 15 decimal digits).
const maxSFInteger = 999_999_999_999_999

// sfInteger clamps n to a structured-field Integer, so a conforming
// parser reads the header instead of rejecting it whole. Only q and r
// need it: w is at most 31 days in seconds and t at most W + B.
func sfInteger(n int64) int64 {
	return min(max(n, -maxSFInteger), maxSFInteger)
}

// appendPolicy appends one quota policy item: "name";q=C;w=W, with w only
// when the window is a whole number of seconds (the field has no
// sub-second precision).
func appendPolicy(b []byte, name string, capacity int64, window time.Duration) []byte {
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `";q=`...)
	b = strconv.AppendInt(b, sfInteger(capacity), 10)
	if window%time.Second == 0 {
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, int64(window/time.Second), 10)
	}
	return b
}

func appendSetPolicy(b []byte, s *limiter.Set) []byte {
	for i := 0; i < s.Len(); i++ {
		if i > 0 {
			b = append(b, ", "...)
		}
		l := s.At(i)
		c, _ := limiter.Capacity(l.Rate, l.Window) // NewSet checked it
		b = appendPolicy(b, l.Name, c, l.Window)
	}
	return b
}

// Fields returns the values of the RateLimit-Policy and RateLimit headers
// that a Middleware built by New writes for decision d of a single limit
// named name ("" is DefaultPolicyName) on a limiter of the given window:
// the same bytes, for a caller that carries them in another protocol
// (package grpclimit writes them as gRPC metadata). name is not
// validated: New checks it.
func Fields(name string, window time.Duration, d limiter.Decision) (policy, rateLimit string) {
	if name == "" {
		name = DefaultPolicyName
	}
	var buf [128]byte
	policy = string(appendPolicy(buf[:0], name, d.Limit, window))
	return policy, string(appendOneItem(buf[:0], name, &d))
}

// SetFields is Fields for decision d of set, as a Middleware built by
// NewSet writes them: one item per limit, in the set's order.
func SetFields(set *limiter.Set, d limiter.SetDecision) (policy, rateLimit string) {
	var buf [512]byte
	policy = string(appendSetPolicy(buf[:0], set))
	return policy, string(appendSetItems(buf[:0], &d))
}

// appendOneItem appends the RateLimit item of a single limit's decision.
func appendOneItem(b []byte, name string, d *limiter.Decision) []byte {
	return appendItem(b, name, d.Remaining, reset(d.RetryAfter, d.ResetAfter))
}

// appendSetItems appends the RateLimit items of a set's decision, one per
// limit.
func appendSetItems(b []byte, d *limiter.SetDecision) []byte {
	for i, ld := range d.Limits {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendItem(b, ld.Name, ld.Remaining, reset(ld.RetryAfter, ld.ResetAfter))
	}
	return b
}

// appendItem appends one service limit item: "name";r=R;t=T.
func appendItem(b []byte, name string, remaining, t int64) []byte {
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `";r=`...)
	b = strconv.AppendInt(b, sfInteger(remaining), 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, t, 10)
}
