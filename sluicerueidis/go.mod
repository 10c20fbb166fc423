module github.com/sluice-go/sluice/sluicerueidis

go 1.26.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/redis/go-redis/v9 v9.18.0
	github.com/redis/rueidis v1.0.79
	github.com/sluice-go/sluice v0.0.0-00010101000000-000000000000
	github.com/valkey-io/valkey-go v1.0.80
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/time v0.10.0 // indirect
)

replace github.com/sluice-go/sluice => ../
