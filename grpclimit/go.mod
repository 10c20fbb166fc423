module github.com/sluice-go/sluice/grpclimit

go 1.26.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/dunglas/httpsfv v1.1.2
	github.com/redis/go-redis/v9 v9.18.0
	github.com/sluice-go/sluice v0.0.0-00010101000000-000000000000
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace github.com/sluice-go/sluice => ../
