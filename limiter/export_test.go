package limiter

// WaitWith exposes waitWith to the external tests.
var WaitWith = waitWith
