// Package demo owns `permitd demo`'s run: a 3-node register cluster in
// this process on loopback (cluster.go; secured with --secure, secure.go)
// and its three scenes: clients on a strict limit and a leader kill
// (scene1.go), leased workers with a group cut off from the register
// (scene2.go), and multi-limit reserves for a fake LLM API (scene3.go,
// scene3api.go). Run (demo.go) is its entry point; the command's flags
// and help are cmd/permitd's (demo.go), which fills a Config.
package demo
