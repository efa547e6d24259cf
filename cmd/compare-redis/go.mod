module github.com/permitd/permitd/cmd/compare-redis

go 1.26.8

require (
	github.com/permitd/permitd v0.0.0
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/fatih/color v1.13.0 // indirect
	github.com/hashicorp/go-hclog v1.6.3 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.14 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

// The benchmark against Redis lives in a module of its own, so that
// go-redis stays out of the product's dependencies; it always builds
// against this checkout of permitd.
replace github.com/permitd/permitd => ../..
