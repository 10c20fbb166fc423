// Package rediscore is the one limiter on Redis behind packages redisabs
// and redissup: the Limiter type both return, with its methods, and the
// Client both take. Start from those packages: redisabs.New builds the
// absolute strategy (no window ever admits more than its capacity),
// redissup.New the suppressed one (above the rate, requests are admitted
// with a falling probability, under a hard ceiling), and their package
// docs say how to run them. NewAbsolute and NewSuppressed are what they
// call.
//
// The methods' docs name the strategy where the two differ. A function
// that should work under either strategy can take a *Limiter, or the
// limiter.Limiter and limiter.SetLimiter interfaces it implements.
package rediscore
