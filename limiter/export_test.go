package limiter

// WaitWith exposes waitWith to the external tests.
var WaitWith = waitWith

// WaitSetWith exposes waitSetWith to the external tests.
var WaitSetWith = waitSetWith

// ValidateRate exposes Rate.validate to the external tests.
var ValidateRate = Rate.validate
