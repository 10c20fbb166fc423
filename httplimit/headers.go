package httplimit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// Canonical header keys, written to the header map directly.
const (
	hPolicy     = "Ratelimit-Policy"
	hRateLimit  = "Ratelimit"
	hRetryAfter = "Retry-After"
	hLimit      = "X-Ratelimit-Limit"
	hRemaining  = "X-Ratelimit-Remaining"
	hReset      = "X-Ratelimit-Reset"
)

// writeHeaders sets the RateLimit headers, the legacy ones when enabled
// and, on a refusal that waiting can cure, Retry-After. The values' slices
// come from one allocation, each capped so that an Add reallocates
// instead of writing over its neighbour.
func (m *Middleware) writeHeaders(w http.ResponseWriter, policy, item string, d *limiter.Decision) {
	h := w.Header()
	retry := !d.Allowed && !d.Never
	n := 2
	if m.cfg.legacy {
		n += 3
	}
	if retry {
		n++
	}
	vs := make([]string, 0, n)
	set := func(k, v string) {
		vs = append(vs, v)
		h[k] = vs[len(vs)-1 : len(vs) : len(vs)]
	}
	set(hPolicy, policy)
	set(hRateLimit, item)
	if m.cfg.legacy {
		set(hLimit, strconv.FormatInt(d.Limit, 10))
		set(hRemaining, strconv.FormatInt(d.Remaining, 10))
		set(hReset, strconv.FormatInt(time.Now().Unix()+reset(d.RetryAfter, d.ResetAfter), 10))
	}
	if retry {
		set(hRetryAfter, strconv.FormatInt(ceilSeconds(d.RetryAfter), 10))
	}
}

// reset is the t parameter: RetryAfter or, when the request fits now or
// never will, ResetAfter, in seconds rounded up.
func reset(retryAfter, resetAfter time.Duration) int64 {
	if retryAfter > 0 {
		return ceilSeconds(retryAfter)
	}
	return ceilSeconds(resetAfter)
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// sfInteger clamps q and r to a structured-field Integer (RFC 9651
// §3.3.1: 15 digits), which a parser would otherwise reject.
func sfInteger(n int64) int64 {
	const most = 999_999_999_999_999
	return min(max(n, -most), most)
}

// appendPolicy appends one quota policy item: "name";q=C;w=W, with w only
// for a window of whole seconds.
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

// Fields returns the RateLimit-Policy and RateLimit values a Middleware
// built by New writes for decision d of a limit named name ("" is
// DefaultPolicyName; not validated) over window, for another protocol
// (package grpclimit). It is safe for concurrent use.
func Fields(name string, window time.Duration, d limiter.Decision) (policy, rateLimit string) {
	if name == "" {
		name = DefaultPolicyName
	}
	var buf [128]byte
	policy = string(appendPolicy(buf[:0], name, d.Limit, window))
	return policy, string(appendOneItem(buf[:0], name, &d))
}

// SetFields is Fields for decision d of set, one item per limit, as
// NewSet's Middleware writes them.
func SetFields(set *limiter.Set, d limiter.SetDecision) (policy, rateLimit string) {
	var buf [512]byte
	policy = string(appendSetPolicy(buf[:0], set))
	return policy, string(appendSetItems(buf[:0], &d))
}

func appendOneItem(b []byte, name string, d *limiter.Decision) []byte {
	return appendItem(b, name, d.Remaining, reset(d.RetryAfter, d.ResetAfter))
}

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
