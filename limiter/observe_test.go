package limiter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

type counter struct{ decisions, events int }

func (c *counter) ObserveDecision(context.Context, limiter.DecisionEvent) { c.decisions++ }
func (c *counter) ObserveEvent(context.Context, limiter.Event)            { c.events++ }

func TestMultiObserver(t *testing.T) {
	if o := limiter.MultiObserver(nil, nil); o != nil {
		t.Errorf("MultiObserver(nil, nil) = %v, want nil", o)
	}
	a := &counter{}
	if o := limiter.MultiObserver(nil, a); o != limiter.Observer(a) {
		t.Errorf("MultiObserver(nil, a) = %v, want a itself", o)
	}
	b := &counter{}
	o := limiter.MultiObserver(a, nil, b)
	o.ObserveDecision(context.Background(), limiter.DecisionEvent{})
	o.ObserveEvent(context.Background(), limiter.Event{})
	o.ObserveEvent(context.Background(), limiter.Event{})
	if *a != (counter{1, 2}) || *b != (counter{1, 2}) {
		t.Errorf("a = %+v, b = %+v, want 1 decision and 2 events each", *a, *b)
	}
}

// TestLogObserver: state changes as WithLogger logs them, failed calls at
// Warn, cleanup runs at Info (Warn on error), decisions at Debug only.
func TestLogObserver(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		var buf bytes.Buffer
		o := limiter.NewLogObserver(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level})))
		ctx := context.Background()
		o.ObserveDecision(ctx, limiter.DecisionEvent{Provider: "redisabs", Strategy: "absolute", Op: "inc", Key: "secret-key", Cost: 2,
			Decision: limiter.Decision{}, Backend: true, Duration: time.Millisecond})
		o.ObserveEvent(ctx, limiter.Event{Kind: window.EventBackendError, Provider: "redisabs", Op: "inc",
			ErrorClass: window.ErrorTimeout, Err: errors.New("deadline"), Duration: 250 * time.Millisecond})
		o.ObserveEvent(ctx, limiter.Event{Kind: window.EventStateChange, Provider: "redisabs",
			State: limiter.StateChange{Provider: "redisabs", Degraded: true, Cause: errors.New("deadline")}})
		o.ObserveEvent(ctx, limiter.Event{Kind: window.EventStateChange, Provider: "redisabs",
			State: limiter.StateChange{Provider: "redisabs", Duration: time.Second, Reconciled: 4}})
		o.ObserveEvent(ctx, limiter.Event{Kind: window.EventCleanup, Provider: "cleanup",
			Cleanup: limiter.CleanupReport{Scanned: 9, Deleted: 2}})
		o.ObserveEvent(ctx, limiter.Event{Kind: window.EventCleanup, Provider: "cleanup",
			Cleanup: limiter.CleanupReport{Scanned: 1, Err: errors.New("lost"), ErrorClass: window.ErrorConnection}})
		var got []string
		dec := json.NewDecoder(&buf)
		for dec.More() {
			var rec map[string]any
			if err := dec.Decode(&rec); err != nil {
				t.Fatal(err)
			}
			if _, ok := rec["key"]; ok {
				t.Errorf("a record logs the key: %v", rec)
			}
			got = append(got, rec["level"].(string)+" "+rec["msg"].(string))
		}
		want := []string{
			"WARN sluice: Redis call failed",
			"WARN sluice: Redis unavailable, answering by the failure policy",
			"INFO sluice: Redis answers again",
			"INFO sluice: cleanup run",
			"WARN sluice: cleanup run",
		}
		if level == slog.LevelDebug {
			want = append([]string{"DEBUG sluice: decision"}, want...)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("at %v: records %q, want %q", level, got, want)
		}
	}
}
