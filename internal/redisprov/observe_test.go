package redisprov

import (
	"context"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// replyKind is a Redis error replyKind, as go-redis returns one.
type replyKind string

func (e replyKind) Error() string { return string(e) }
func (replyKind) RedisError()     {}

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

func TestErrorClass(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(live)
	cancel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want string
	}{
		{"nil", live, nil, ""},
		{"bad cost", live, fmt.Errorf("redisabs: inc: %w", limiter.ErrInvalidCost), ""},
		{"bad key", live, fmt.Errorf("redisabs: inc: %w", key.ErrInvalid), ""},
		{"closed", live, fmt.Errorf("redisabs: inc: %w", limiter.ErrClosed), ""},
		{"deadline", live, fmt.Errorf("redisabs: inc: %w", context.DeadlineExceeded), window.ErrorTimeout},
		{"socket timeout", live, &net.OpError{Op: "read", Net: "tcp", Err: netTimeout{}}, window.ErrorTimeout},
		{"refused", live, fmt.Errorf("redisabs: inc: %w", refused), window.ErrorConnection},
		{"LOADING", live, replyKind("LOADING Redis is loading the dataset in memory"), window.ErrorUnavailable},
		{"OOM", live, replyKind("OOM command not allowed"), window.ErrorUnavailable},
		{"other replyKind", live, replyKind("ERR unknown command"), window.ErrorReply},
		{"caller cancelled", done, fmt.Errorf("redisabs: inc: %w", context.Canceled), window.ErrorCanceled},
		{"caller gone, timeout", done, fmt.Errorf("redisabs: inc: %w", context.DeadlineExceeded), window.ErrorCanceled},
	} {
		if got := ErrorClass(c.ctx, c.err); got != c.want {
			t.Errorf("%s: ErrorClass(%v) = %q, want %q", c.name, c.err, got, c.want)
		}
	}
}
