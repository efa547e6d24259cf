// Package demo owns `permitd demo`'s run: a 3-node register cluster in
// this process on loopback (cluster.go; secured with --secure, secure.go)
// and its three scenes: clients on a strict limit and a leader kill
// (scene1.go), leased workers with a group cut off from the register
// (scene2.go), and multi-limit reserves for a fake LLM API (scene3.go,
// scene3api.go). Each scene says first, in plain words, what it does and
// what it proves, prints its numbers against their bounds, and ends with
// checks (each bound computed from the scene's configuration, its formula
// and values printed) and a PASS or FAIL verdict (verdict.go). Run
// (demo.go) is its entry point, and fails if a scene failed; the
// command's flags and help are cmd/permitd's (demo.go), which fills a
// Config.
package demo
