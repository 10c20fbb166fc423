// Package config names the configuration every sluice provider reads: the
// option settings of package internal/settings over package limiter's
// types. Users never see it: they pass limiter.Option values, and each
// provider resolves them with New.
package config

import (
	"fmt"

	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/limiter"
)

// Config is the resolved configuration.
type Config = settings.Config[limiter.Observer, limiter.FailurePolicy, limiter.StateChange]

// New applies opts over the defaults and validates the result; a value out
// of range is limiter.ErrInvalidConfig. It takes limiter.Option values and
// function literals over *Config alike.
func New[O ~func(*Config)](opts ...O) (Config, error) {
	return settings.New[limiter.Observer, limiter.FailurePolicy, limiter.StateChange](limiter.ErrInvalidConfig, opts...)
}

// ValidatePrefix reports limiter.ErrInvalidConfig, with the reason, for a
// prefix that cannot start a Redis key of the schema.
func ValidatePrefix(p string) error {
	if err := settings.ValidatePrefix(p); err != nil {
		return fmt.Errorf("%w: %w", limiter.ErrInvalidConfig, err)
	}
	return nil
}

// CheckCost reports limiter.ErrInvalidCost for n < 0. Every n ≥ 0 is a
// cost: one above the capacity is a decision with Never set.
func CheckCost(n int64) error {
	if n < 0 {
		return fmt.Errorf("%w: n = %d (want n ≥ 0)", limiter.ErrInvalidCost, n)
	}
	return nil
}
