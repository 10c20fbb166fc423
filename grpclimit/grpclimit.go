package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-go/sluice/httplimit"
	win "github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// The metadata keys of the IETF RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers): gRPC metadata keys are lower
// case. Their values are the bytes package httplimit writes in the HTTP
// headers of the same names for the same decision.
const (
	MetadataPolicy    = "ratelimit-policy"
	MetadataRateLimit = "ratelimit"
)

// ErrorFunc decides what happens to a call that could not be decided: the
// limiter returned an error (a Redis provider under limiter.FailError
// while Redis is down: err matches limiter.ErrUnavailable or is Redis's
// error), or a rate, set or cost function returned an error that carries
// no gRPC status. It returns nil to let the call through, without
// rate-limit metadata, or the error the client gets (a status error, as
// from status.Error). fullMethod is the call's "/package.Service/Method".
// An ErrorFunc must be safe for concurrent use.
type ErrorFunc func(ctx context.Context, fullMethod string, err error) error

// RefuseOnError is an ErrorFunc that fails every call it is given with
// codes.Unavailable, without the error's text (it may name servers): for
// a service that would rather refuse than serve unlimited while the
// limiter cannot answer.
func RefuseOnError(context.Context, string, error) error {
	return status.Error(codes.Unavailable, "sluice: the rate limiter cannot decide the call")
}

// Option configures an Interceptor.
type Option func(*config)

type config struct {
	key      KeyFunc
	rateFn   func(ctx context.Context, fullMethod string) (limiter.Rate, error)
	setFn    func(ctx context.Context, fullMethod string) (*limiter.Set, error)
	cost     func(ctx context.Context, fullMethod string) (int64, error)
	skip     func(ctx context.Context, fullMethod string) bool
	methods  []string // exempt method patterns; nil until set means defaultSkip
	setM     bool
	allow    []string
	perMsg   bool
	onError  ErrorFunc
	logger   *slog.Logger
	loggerOK bool
}

// WithKey sets how a call is keyed. Default KeyByIP: the peer's address,
// no metadata trusted, IPv6 grouped by /64.
func WithKey(f KeyFunc) Option { return func(c *config) { c.key = f } }

// WithRateFunc sets a per-call rate for a single limit (New): the method's
// or the tenant's tier. f's rate replaces the limit's Rate for the call,
// over the limiter's window. An error with a gRPC status is returned to
// the client as it is; any other goes to the error handler. Not for
// NewSet. Methods with rates of their own usually want counts of their
// own too: key them with PerMethod.
func WithRateFunc(f func(ctx context.Context, fullMethod string) (limiter.Rate, error)) Option {
	return func(c *config) { c.rateFn = f }
}

// WithSetFunc sets a per-call set of limits (the method's or the tenant's
// tier) for NewSet. Build each tier's Set once and return it. An error
// with a gRPC status is returned to the client as it is; any other goes
// to the error handler. Not for New.
func WithSetFunc(f func(ctx context.Context, fullMethod string) (*limiter.Set, error)) Option {
	return func(c *config) { c.setFn = f }
}

// WithCost sets a per-call cost in units. Default 1 for every call (a
// stream's open included). 0 is a peek: decided for one unit, nothing
// recorded. A negative cost, or an error without a gRPC status, goes to
// the error handler; an error with a gRPC status is returned to the
// client.
func WithCost(f func(ctx context.Context, fullMethod string) (int64, error)) Option {
	return func(c *config) { c.cost = f }
}

// WithSkip sets a function that exempts a call: it goes to the handler
// without a key, a limiter call or metadata. Default: none (beside the
// methods of WithSkipMethods).
func WithSkip(f func(ctx context.Context, fullMethod string) bool) Option {
	return func(c *config) { c.skip = f }
}

// WithSkipMethods sets the methods exempt from the limit, as full method
// names ("/grpc.health.v1.Health/Check") or patterns ending in '*' that
// match every method starting with what comes before it
// ("/grpc.health.v1.Health/*", "/grpc.reflection.*"). An exempt call goes
// to the handler without a key, a limiter call or metadata. Default:
// DefaultSkipMethods, the health service and server reflection, v1 and
// v1alpha, so that a load balancer's probes and a developer's grpcurl are
// never refused nor charged. WithSkipMethods() with no pattern limits
// every method.
func WithSkipMethods(patterns ...string) Option {
	return func(c *config) { c.methods, c.setM = append([]string{}, patterns...), true }
}

// DefaultSkipMethods returns the patterns exempt by default:
// "/grpc.health.v1.Health/*" and "/grpc.reflection.*" (the reflection
// services grpc.reflection.v1 and grpc.reflection.v1alpha).
func DefaultSkipMethods() []string {
	return []string{"/grpc.health.v1.Health/*", "/grpc.reflection.*"}
}

// WithAllowKeys exempts calls whose key (as the KeyFunc returns it,
// "ip:10.0.0.7") is one of keys: they go to the handler with no limiter
// call and no metadata. Default: none.
func WithAllowKeys(keys ...string) Option {
	return func(c *config) { c.allow = append(c.allow, keys...) }
}

// WithMessageCharge charges a stream, beside its open, one unit for every
// message the client sends, with the rate or set and the key chosen at
// the open. A message the limiter refuses is dropped: the stream's
// RecvMsg returns the refusal (codes.ResourceExhausted with its
// RetryInfo, the RateLimit fields in the trailer), so a handler that
// returns RecvMsg's error ends the stream with it; a later RecvMsg is
// decided afresh. Default off: a stream is charged once, when it opens.
// Unary calls are not affected.
func WithMessageCharge() Option { return func(c *config) { c.perMsg = true } }

// WithErrorHandler sets what happens to a call that could not be decided
// (ErrorFunc). Default: the call goes through, without rate-limit
// metadata, and the error is logged (WithLogger): a limiter that cannot
// answer does not take the service down with it. RefuseOnError refuses
// such calls instead. Key errors never reach it: a call that cannot be
// keyed is refused (KeyFunc).
func WithErrorHandler(f ErrorFunc) Option { return func(c *config) { c.onError = f } }

// WithLogger sets the logger of the default error handler. Default
// slog.Default(). It logs the first error at level Warn and then at most
// one line a minute, with the number of errors since the last line. A
// nil logger silences it.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger, c.loggerOK = l, true }
}

// Interceptor limits the calls of a gRPC server. Build one with New (a
// single limit) or NewSet (a set of limits); it is safe for concurrent
// use. Its Unary and Stream methods are a grpc.UnaryServerInterceptor and
// a grpc.StreamServerInterceptor:
//
//	grpc.NewServer(grpc.ChainUnaryInterceptor(lim.Unary), grpc.ChainStreamInterceptor(lim.Stream))
//
// The zero Interceptor limits nothing: it fails every call with
// codes.Internal.
type Interceptor struct {
	cfg     config
	allow   map[string]struct{}
	errLog  *errorLog
	limited bool // built by New or NewSet

	// single limit
	one    limiter.Limiter
	name   string
	rate   limiter.Rate
	window time.Duration

	// set of limits
	many limiter.SetLimiter
	set  *limiter.Set
}

// New returns an interceptor that limits each key to limit on l: at most
// limit.Rate × W units in any span of W, where W is l's window, stated in
// the w parameter of the ratelimit-policy metadata. The rules are
// httplimit.New's: leave limit.Window 0 for a sluice provider (it reports
// its window: a Window() time.Duration method); a Limiter of your own
// without one must be given its window in limit.Window; a different window is an error.
// limit.Name names the policy ("" means httplimit.DefaultPolicyName).
// limit.Rate may be the zero Rate only with WithRateFunc. Errors match
// limiter.ErrInvalidConfig, or the rate's errors.
func New(l limiter.Limiter, limit limiter.Limit, opts ...Option) (*Interceptor, error) {
	it, err := newInterceptor(opts)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, fmt.Errorf("%w: grpclimit.New with a nil limiter", limiter.ErrInvalidConfig)
	}
	if it.cfg.setFn != nil {
		return nil, fmt.Errorf("%w: WithSetFunc is for NewSet; New takes WithRateFunc", limiter.ErrInvalidConfig)
	}
	if limit, err = win.ResolveLimit(l, limit, httplimit.DefaultPolicyName); err != nil {
		return nil, err
	}
	if limit.Rate != (limiter.Rate{}) || it.cfg.rateFn == nil {
		if _, err := limiter.Capacity(limit.Rate, limit.Window); err != nil {
			return nil, fmt.Errorf("limit %q: %w", limit.Name, err)
		}
	}
	it.one, it.name, it.rate, it.window = l, limit.Name, limit.Rate, limit.Window
	return it, nil
}

// NewSet returns an interceptor that limits each key to every limit of set
// on l: a call is admitted only when every limit has room for it. The
// metadata has one item per limit, named by Limit.Name, in the set's
// order. set may be nil only with WithSetFunc. Errors match
// limiter.ErrInvalidConfig.
func NewSet(l limiter.SetLimiter, set *limiter.Set, opts ...Option) (*Interceptor, error) {
	it, err := newInterceptor(opts)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, fmt.Errorf("%w: grpclimit.NewSet with a nil limiter", limiter.ErrInvalidConfig)
	}
	if it.cfg.rateFn != nil {
		return nil, fmt.Errorf("%w: WithRateFunc is for New; NewSet takes WithSetFunc", limiter.ErrInvalidConfig)
	}
	if (set != nil || it.cfg.setFn == nil) && set.Len() == 0 {
		return nil, fmt.Errorf("%w: an empty set of limits (build one with limiter.NewSet)", limiter.ErrInvalidConfig)
	}
	it.many, it.set = l, set
	return it, nil
}

func newInterceptor(opts []Option) (*Interceptor, error) {
	it := &Interceptor{limited: true}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: a nil Option", limiter.ErrInvalidConfig)
		}
		o(&it.cfg)
	}
	c := &it.cfg
	if c.key == nil {
		c.key = KeyByIP
	}
	if !c.setM {
		c.methods = DefaultSkipMethods()
	}
	for _, p := range c.methods {
		if p == "" || p == "*" {
			return nil, fmt.Errorf("%w: WithSkipMethods pattern %q (to limit nothing, do not install the interceptor)", limiter.ErrInvalidConfig, p)
		}
	}
	if len(c.allow) > 0 {
		it.allow = make(map[string]struct{}, len(c.allow))
		for _, k := range c.allow {
			it.allow[k] = struct{}{}
		}
	}
	if c.onError == nil {
		if !c.loggerOK {
			c.logger = slog.Default()
		}
		it.errLog = &errorLog{logger: c.logger}
		c.onError = it.errLog.handle
	}
	return it, nil
}

// skipped reports whether fullMethod is exempt.
func (it *Interceptor) skipped(ctx context.Context, fullMethod string) bool {
	for _, p := range it.cfg.methods {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(fullMethod, prefix) {
				return true
			}
		} else if fullMethod == p {
			return true
		}
	}
	return it.cfg.skip != nil && it.cfg.skip(ctx, fullMethod)
}

// charge is one call's admission: the key and the limits it was decided
// on, for a stream's later messages.
type charge struct {
	key  string
	rate limiter.Rate
	set  *limiter.Set
}

// admit decides a call at its start. It returns a nil charge when the
// call goes through undecided (exempt, an allowed key, an error the error
// handler let through), and a non-nil error when the call must fail: the
// refusal, a key error, or the error handler's error. md is the metadata
// to send, nil for none.
func (it *Interceptor) admit(ctx context.Context, fullMethod string) (ch *charge, md metadata.MD, refused bool, err error) {
	if !it.limited {
		return nil, nil, false, status.Error(codes.Internal, "grpclimit: an Interceptor not built by New or NewSet")
	}
	c := &it.cfg
	if it.skipped(ctx, fullMethod) {
		return nil, nil, false, nil
	}
	k, err := c.key(ctx, fullMethod)
	if err == nil {
		switch {
		case k == "":
			err = status.Error(codes.Internal, "grpclimit: the key function returned an empty key")
		case len(k) > key.MaxLen:
			err = status.Errorf(codes.InvalidArgument, "grpclimit: the call's key is longer than %d bytes", key.MaxLen)
		}
	}
	if err != nil {
		return nil, nil, false, keyStatus(err)
	}
	if it.allow != nil {
		if _, ok := it.allow[k]; ok {
			return nil, nil, false, nil
		}
	}
	n := int64(1)
	if c.cost != nil {
		if n, err = c.cost(ctx, fullMethod); err == nil && n < 0 {
			err = fmt.Errorf("%w: the cost function returned %d", limiter.ErrInvalidCost, n)
		}
		if err != nil {
			return nil, nil, false, it.failed(ctx, fullMethod, err)
		}
	}
	ch = &charge{key: k, rate: it.rate, set: it.set}
	switch {
	case it.one != nil && c.rateFn != nil:
		ch.rate, err = c.rateFn(ctx, fullMethod)
	case it.many != nil && c.setFn != nil:
		ch.set, err = c.setFn(ctx, fullMethod)
		if err == nil && ch.set.Len() == 0 {
			err = fmt.Errorf("%w: the set function returned an empty set", limiter.ErrInvalidConfig)
		}
	}
	if err != nil {
		return nil, nil, false, it.failed(ctx, fullMethod, err)
	}
	md, refused, err = it.decide(ctx, fullMethod, ch, n)
	return ch, md, refused, err
}

// decide charges n units of ch and returns the metadata to send and, when
// refused, the refusal. A limiter error goes to the error handler: md is
// nil then.
func (it *Interceptor) decide(ctx context.Context, fullMethod string, ch *charge, n int64) (md metadata.MD, refused bool, err error) {
	var d limiter.Decision
	var policy, rl string
	if it.one != nil {
		d, err = it.one.Inc(ctx, ch.key, ch.rate, n)
		if err == nil {
			policy, rl = httplimit.Fields(it.name, it.window, d)
		}
	} else {
		var sd limiter.SetDecision
		sd, err = it.many.IncSet(ctx, ch.key, ch.set, n)
		if err == nil {
			d = sd.Decision
			policy, rl = httplimit.SetFields(ch.set, sd)
		}
	}
	if err != nil {
		return nil, false, it.failed(ctx, fullMethod, err)
	}
	md = metadata.MD{MetadataPolicy: {policy}, MetadataRateLimit: {rl}}
	if d.Allowed {
		return md, false, nil
	}
	return md, true, refusal(&d)
}

// failed hands err to the error handler, unless it carries a gRPC status
// of its own (a rate, set or cost function that refuses the call).
func (it *Interceptor) failed(ctx context.Context, fullMethod string, err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return it.cfg.onError(ctx, fullMethod, err)
}

// refusal is the status of a refused decision: codes.ResourceExhausted
// with a google.rpc.RetryInfo whose retry_delay is d.RetryAfter, or with
// none when the call can never fit (its cost is above a limit's
// capacity: no wait admits it).
func refusal(d *limiter.Decision) error {
	if d.Never {
		return status.Error(codes.ResourceExhausted, "sluice: the call's cost is above the rate limit's capacity")
	}
	st := status.New(codes.ResourceExhausted, "sluice: rate limit exceeded, retry in "+d.RetryAfter.String())
	if ds, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)}); err == nil {
		st = ds
	}
	return st.Err()
}

// Unary is a grpc.UnaryServerInterceptor: it charges each call before the
// handler runs. An admitted call gets the RateLimit fields as header
// metadata; a refused one fails with codes.ResourceExhausted and a
// RetryInfo, the fields in its header and trailer metadata.
func (it *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	_, md, refused, err := it.admit(ctx, info.FullMethod)
	if md != nil {
		_ = grpc.SetHeader(ctx, md) // fails only once headers are sent, not yet
		if refused {
			_ = grpc.SetTrailer(ctx, md)
		}
	}
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// Stream is a grpc.StreamServerInterceptor: it charges each stream once,
// when it opens, before the handler runs, with the metadata and refusal
// of Unary. With WithMessageCharge, every message the client sends is
// charged too.
func (it *Interceptor) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ch, md, refused, err := it.admit(ss.Context(), info.FullMethod)
	if md != nil {
		_ = ss.SetHeader(md)
		if refused {
			ss.SetTrailer(md)
		}
	}
	if err != nil {
		return err
	}
	if ch != nil && it.cfg.perMsg {
		ss = &chargedStream{ServerStream: ss, it: it, method: info.FullMethod, ch: ch}
	}
	return handler(srv, ss)
}

// chargedStream charges every message received (WithMessageCharge).
type chargedStream struct {
	grpc.ServerStream
	it     *Interceptor
	method string
	ch     *charge
}

func (s *chargedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	md, refused, err := s.it.decide(s.Context(), s.method, s.ch, 1)
	if refused {
		s.SetTrailer(md)
	}
	return err
}

// errorLog is the default error handler: it lets the call through and
// logs the first error, then at most one line a minute.
type errorLog struct {
	logger *slog.Logger
	mu     sync.Mutex
	last   time.Time // of the last line; zero before the first
	since  int       // errors since the last line
}

// logEvery is the shortest interval between two lines of errorLog.
const logEvery = time.Minute

func (l *errorLog) handle(ctx context.Context, fullMethod string, err error) error {
	if l.logger == nil {
		return nil
	}
	l.mu.Lock()
	l.since++
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < logEvery {
		l.mu.Unlock()
		return nil
	}
	n, first := l.since, l.last.IsZero()
	l.last, l.since = now, 0
	l.mu.Unlock()
	msg := "sluice: grpclimit let a call through that the limiter could not decide"
	if !first {
		msg = "sluice: grpclimit let calls through that the limiter could not decide"
	}
	l.logger.WarnContext(ctx, msg, "method", fullMethod, "calls", n, "error", err)
	return nil
}

// keyStatus is the status of a key function's error: its own gRPC status;
// for an httplimit.KeyError, codes.InvalidArgument for its 400,
// codes.Unauthenticated for 401, codes.PermissionDenied for 403 and
// codes.Internal otherwise, its reason as the message; codes.Internal for
// any other error, whose text is not shown.
func keyStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	var ke *httplimit.KeyError
	if !errors.As(err, &ke) {
		return status.Error(codes.Internal, "sluice: the call could not be keyed")
	}
	code := codes.Internal
	switch ke.Status {
	case 400:
		code = codes.InvalidArgument
	case 401:
		code = codes.Unauthenticated
	case 403:
		code = codes.PermissionDenied
	}
	return status.Error(code, "sluice: "+ke.Reason)
}
