package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
)

// KeyFunc returns the limiter key of a request: the client, user or
// account it is counted against. A request it cannot key is refused with
// an error: a *KeyError (Reject) chooses the status, any other gets the
// error handler's default, 503. A KeyFunc must be safe for concurrent use.
type KeyFunc func(r *http.Request) (string, error)

// ErrNoKey is matched (errors.Is) by every error of this package's
// KeyFuncs and by a key longer than key.MaxLen.
var ErrNoKey = errors.New("sluice: no key for the request")

// KeyError is a KeyFunc's refusal to key a request, with the status the
// default error handler answers: 400 for a missing or malformed header,
// 401 for a missing user, 500 for a request with no client address. It
// matches ErrNoKey.
type KeyError struct {
	// Status is the HTTP status of the response, 400 to 599.
	Status int
	// Reason is written in the response body by DefaultError: no secrets.
	Reason string
}

// Reject returns a *KeyError with the given status and reason, for a
// KeyFunc of your own. A status outside 400 to 599 is written as 400.
func Reject(status int, reason string) error {
	if status < 400 || status > 599 {
		status = http.StatusBadRequest
	}
	return &KeyError{Status: status, Reason: reason}
}

func (e *KeyError) Error() string { return ErrNoKey.Error() + ": " + e.Reason }

// Is reports whether target is ErrNoKey.
func (e *KeyError) Is(target error) bool { return target == ErrNoKey }

// KeyByHeader returns a KeyFunc that keys a request by the first value of
// the header name ("X-API-Key"), as "<name in lower case>:<value>"; a
// request without one is refused with 400. A header is whatever the client
// sends: key by one that is checked before the limiter (a verified API
// key).
func KeyByHeader(name string) KeyFunc {
	canon := textproto.CanonicalMIMEHeaderKey(name)
	prefix := strings.ToLower(canon) + ":"
	return func(r *http.Request) (string, error) {
		vs := r.Header[canon]
		if len(vs) == 0 || strings.TrimSpace(vs[0]) == "" {
			return "", &KeyError{Status: http.StatusBadRequest, Reason: "missing header " + canon}
		}
		return prefix + strings.TrimSpace(vs[0]), nil
	}
}

// KeyFromContext returns a KeyFunc that keys a request by the non-empty
// string (or fmt.Stringer) an earlier middleware stored in its context
// under ctxKey, as "<name>:<value>"; a request without one is refused with
// 401, so mount the limiter after the authentication.
func KeyFromContext(name string, ctxKey any) KeyFunc {
	prefix := name + ":"
	return func(r *http.Request) (string, error) {
		var s string
		switch v := r.Context().Value(ctxKey).(type) {
		case string:
			s = v
		case fmt.Stringer:
			s = v.String()
		}
		if s == "" {
			return "", &KeyError{Status: http.StatusUnauthorized, Reason: "no " + name + " in the request"}
		}
		return prefix + s, nil
	}
}

// Static returns a KeyFunc that keys every request by s: one limit for all
// clients or, composed, a route's name (Compose(Static("search"), user)).
func Static(s string) KeyFunc {
	return func(*http.Request) (string, error) {
		if s == "" {
			return "", &KeyError{Status: http.StatusInternalServerError, Reason: "an empty static key"}
		}
		return s, nil
	}
}

// Compose returns a KeyFunc that joins the keys of fns with '|', a '|' or
// '%' inside a part percent-escaped so that two lists of parts never give
// one key. The first part that refuses the request refuses it.
func Compose(fns ...KeyFunc) KeyFunc {
	return func(r *http.Request) (string, error) {
		var b strings.Builder
		for i, f := range fns {
			k, err := f(r)
			if err != nil {
				return "", err
			}
			if i > 0 {
				b.WriteByte('|')
			}
			partEscaper.WriteString(&b, k)
		}
		return b.String(), nil
	}
}

var partEscaper = strings.NewReplacer("|", "%7C", "%", "%25")
