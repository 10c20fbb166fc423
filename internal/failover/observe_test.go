package failover

import (
	"context"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/sluice-go/sluice/internal/config"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// reply is a Redis error reply, as go-redis returns one.
type reply string

func (e reply) Error() string { return string(e) }
func (reply) RedisError()     {}

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
		{"deadline", live, fmt.Errorf("redisabs: inc: %w", context.DeadlineExceeded), config.ErrorTimeout},
		{"socket timeout", live, &net.OpError{Op: "read", Net: "tcp", Err: netTimeout{}}, config.ErrorTimeout},
		{"refused", live, fmt.Errorf("redisabs: inc: %w", refused), config.ErrorConnection},
		{"LOADING", live, reply("LOADING Redis is loading the dataset in memory"), config.ErrorUnavailable},
		{"OOM", live, reply("OOM command not allowed"), config.ErrorUnavailable},
		{"other reply", live, reply("ERR unknown command"), config.ErrorReply},
		{"caller cancelled", done, fmt.Errorf("redisabs: inc: %w", context.Canceled), config.ErrorCanceled},
		{"caller gone, timeout", done, fmt.Errorf("redisabs: inc: %w", context.DeadlineExceeded), config.ErrorCanceled},
	} {
		if got := ErrorClass(c.ctx, c.err); got != c.want {
			t.Errorf("%s: ErrorClass(%v) = %q, want %q", c.name, c.err, got, c.want)
		}
	}
}
