package sluicerueidis

import (
	"encoding"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// ReplyError is a Redis error reply received through rueidis, as go-redis
// reads one: it satisfies redis.Error (its RedisError method), so that
// redis.HasErrorPrefix (NOSCRIPT, MOVED), the providers' failure policy
// (LOADING, BUSY, OOM and the other replies that mean "cannot serve now")
// and the scripts' own errors (SLUICEWINDOW, SLUICELAYOUT) read it as
// go-redis' own. Its text is rueidis': the server's, without the generic
// "ERR " code that rueidis drops (go-redis keeps it; HasErrorPrefix skips
// it either way). Unwrap returns the *rueidis.RedisError.
type ReplyError struct {
	err *rueidis.RedisError
}

// Error returns the reply's text, as the server sent it.
func (e *ReplyError) Error() string { return e.err.Error() }

// RedisError marks the type as a Redis reply error for go-redis.
func (e *ReplyError) RedisError() {}

// Unwrap returns the rueidis error.
func (e *ReplyError) Unwrap() error { return e.err }

var _ redis.Error = (*ReplyError)(nil)

// mapErr turns a rueidis error into go-redis' form: a nil reply into
// redis.Nil, a reply error into a *ReplyError; any other error (a
// connection's, a context's) is returned as it is.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if rueidis.IsRedisNil(err) {
		return redis.Nil
	}
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		return &ReplyError{err: re}
	}
	return err
}

// reply reads a rueidis result as go-redis' Cmd does: integers as int64,
// strings (simple, bulk, verbatim, big numbers) as string, arrays and sets
// as []any, maps as map[any]any, doubles as float64, booleans as bool,
// and an error inside an array as the element's *ReplyError; a nil reply
// is redis.Nil.
func reply(r rueidis.RedisResult) (any, error) {
	m, err := r.ToMessage()
	if err != nil {
		return nil, mapErr(err)
	}
	return value(&m)
}

func value(m *rueidis.RedisMessage) (any, error) {
	if err := m.Error(); err != nil {
		return nil, mapErr(err)
	}
	switch {
	case m.IsInt64():
		return m.AsInt64()
	case m.IsString():
		return m.ToString()
	case m.IsArray():
		arr, err := m.ToArray()
		if err != nil {
			return nil, mapErr(err)
		}
		out := make([]any, len(arr))
		for i := range arr {
			v, err := value(&arr[i])
			switch {
			case errors.Is(err, redis.Nil):
				out[i] = nil
			case err != nil:
				out[i] = err
			default:
				out[i] = v
			}
		}
		return out, nil
	case m.IsMap():
		kv, err := m.AsMap()
		if err != nil {
			return nil, mapErr(err)
		}
		out := make(map[any]any, len(kv))
		for k, e := range kv {
			v, err := value(&e)
			switch {
			case errors.Is(err, redis.Nil):
				out[k] = nil
			case err != nil:
				out[k] = err
			default:
				out[k] = v
			}
		}
		return out, nil
	case m.IsBool():
		return m.AsBool()
	case m.IsFloat64():
		return m.AsFloat64()
	}
	v, err := m.ToAny() // verbatim strings and big numbers: their text
	return v, mapErr(err)
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
