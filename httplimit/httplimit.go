package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	win "github.com/sluice-go/sluice/internal/window"

	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// DefaultPolicyName is the policy name of a single limit whose Name is
// empty, in the RateLimit-Policy and RateLimit headers.
const DefaultPolicyName = "default"

// Result is what the middleware decided for a refused request, given to
// the DenyFunc.
type Result struct {
	Key  string // the limiter key of the request
	Cost int64  // the units the request asked for
	// SetDecision is the limiter's answer; a single limit's is a set of
	// one, named after the limit.
	limiter.SetDecision
}

// DenyFunc writes the response to a refused request. When it is called,
// the Retry-After, RateLimit-Policy and RateLimit headers (and the legacy
// ones, when enabled) are already set on w. It must not keep res.
type DenyFunc func(w http.ResponseWriter, r *http.Request, res *Result)

// ErrorFunc writes the response to a request that could not be decided:
// its KeyFunc refused it (err matches ErrNoKey), a rate, set or cost
// function failed, or the limiter failed. No rate-limit header is set.
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
// 503 Service Unavailable for any other error, whose text is not shown.
func DefaultError(w http.ResponseWriter, _ *http.Request, err error) {
	var ke *KeyError
	if errors.As(err, &ke) {
		http.Error(w, ke.Reason, ke.Status)
		return
	}
	http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
}

// Middleware limits the requests of an http.Handler. Build one with New
// (a single limit) or NewSet (a set of limits); it is immutable and safe
// for concurrent use. The zero Middleware answers every request 500.
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
// limit.Rate × W units in any span of W, W being l's window. Leave
// limit.Window 0 for a sluice provider (one that reports its window); a
// Limiter of your own without a Window method must be given it. A
// limit.Window that differs from l's is an error. limit.Name names the
// policy in the headers ("" is DefaultPolicyName); limit.Rate may be zero
// only with WithRateFunc; limit.Bucket is ignored. Errors match
// limiter.ErrInvalidConfig, or the rate's errors.
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
	if limit, err = win.ResolveLimit(l, limit, DefaultPolicyName); err != nil {
		return nil, err
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

// NewSet returns a middleware that admits a request only when every limit
// of set on l has room for it; the headers have one item per limit, in the
// set's order. set may be nil only with WithSetFunc. Errors match
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
		if err := win.CheckSet(set); err != nil {
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
	if m.cfg.methods == nil {
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
	ld := limiter.LimitDecision{Name: m.name, Limit: d.Limit, Remaining: d.Remaining, RetryAfter: d.RetryAfter,
		ResetAfter: d.ResetAfter, SuppressionFactor: d.SuppressionFactor, Refused: true, Never: d.Never}
	m.cfg.onDeny(w, r, &Result{Key: k, Cost: n, SetDecision: limiter.SetDecision{Decision: d, Limits: []limiter.LimitDecision{ld}}})
}

func (m *Middleware) serveSet(w http.ResponseWriter, r *http.Request, next http.Handler, k string, n int64) {
	set, policy := m.set, m.policy
	if m.cfg.setFn != nil {
		var err error
		if set, err = m.cfg.setFn(r); err == nil {
			err = win.CheckSet(set)
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
