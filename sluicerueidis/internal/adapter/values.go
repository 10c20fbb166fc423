package adapter

import (
	"encoding"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReplyError is a Redis error reply received through the client library,
// as go-redis reads one: it satisfies redis.Error (its RedisError method),
// so that redis.HasErrorPrefix (NOSCRIPT, MOVED), the providers' failure
// policy (LOADING, BUSY, OOM and the other replies that mean "cannot
// serve now") and the scripts' own errors (SLUICEWINDOW, SLUICELAYOUT)
// read it as go-redis' own. Its text is the library's: the server's,
// without the generic "ERR " code that rueidis and valkey-go drop
// (go-redis keeps it; HasErrorPrefix skips it either way). Unwrap returns
// the library's error (a *rueidis.RedisError, a *valkey.ValkeyError).
type ReplyError struct {
	err error
}

// Error returns the reply's text, as the server sent it.
func (e *ReplyError) Error() string { return e.err.Error() }

// RedisError marks the type as a Redis reply error for go-redis.
func (e *ReplyError) RedisError() {}

// Unwrap returns the library's error.
func (e *ReplyError) Unwrap() error { return e.err }

var _ redis.Error = (*ReplyError)(nil)

// libReplyError is a library's reply error: a Redis error reply, or a nil
// reply when IsNil.
type libReplyError interface {
	error
	IsNil() bool
}

// mapErr turns a library's error into go-redis' form: a nil reply into
// redis.Nil, a reply error into a *ReplyError; any other error (a
// connection's, a context's) is returned as it is.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	var re libReplyError
	if !errors.As(err, &re) {
		return err
	}
	if re.IsNil() {
		return redis.Nil
	}
	return &ReplyError{err: re}
}

// reply reads a library's reply, as its ToAny gave it, as go-redis' Cmd
// does: integers as int64, strings (simple, bulk, verbatim, big numbers)
// as string, arrays and sets as []any, maps as map[any]any, doubles as
// float64, booleans as bool, nil inside an array or a map as nil, and an
// error inside one as the element's *ReplyError; a nil reply is
// redis.Nil.
func reply(r Reply) (any, error) {
	if r.Err != nil {
		return nil, mapErr(r.Err)
	}
	return value(r.Val), nil
}

func value(v any) any {
	switch v := v.(type) {
	case error:
		if err := mapErr(v); err != redis.Nil {
			return err
		}
		return nil
	case []any:
		for i, x := range v {
			v[i] = value(x)
		}
		return v
	case map[string]any:
		out := make(map[any]any, len(v))
		for k, x := range v {
			out[k] = value(x)
		}
		return out
	}
	return v
}

// argString writes a command argument as go-redis does: strings and bytes
// as they are, integers in decimal, floats in the shortest form that reads
// back exactly, booleans as 1 and 0, nil as the empty string, times in
// RFC 3339 and durations in nanoseconds, and encoding.BinaryMarshaler
// values by their MarshalBinary; any other type is an error, as in
// go-redis.
func argString(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	case int:
		return strconv.FormatInt(int64(v), 10), nil
	case int8:
		return strconv.FormatInt(int64(v), 10), nil
	case int16:
		return strconv.FormatInt(int64(v), 10), nil
	case int32:
		return strconv.FormatInt(int64(v), 10), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case uint:
		return strconv.FormatUint(uint64(v), 10), nil
	case uint8:
		return strconv.FormatUint(uint64(v), 10), nil
	case uint16:
		return strconv.FormatUint(uint64(v), 10), nil
	case uint32:
		return strconv.FormatUint(uint64(v), 10), nil
	case uint64:
		return strconv.FormatUint(v, 10), nil
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 32), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case bool:
		if v {
			return "1", nil
		}
		return "0", nil
	case time.Time:
		return v.Format(time.RFC3339Nano), nil
	case time.Duration:
		return strconv.FormatInt(v.Nanoseconds(), 10), nil
	case net.IP:
		return string(v), nil
	case encoding.BinaryMarshaler:
		b, err := v.MarshalBinary()
		if err != nil {
			return "", err
		}
		return string(b), nil
	}
	return "", fmt.Errorf("redis: can't marshal %T (implement encoding.BinaryMarshaler)", v)
}
