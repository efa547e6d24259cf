// Package bench owns `permitd bench`'s runs against a cluster: the closed
// and open loops over HTTP and the binary protocol (Run: run.go, conn.go,
// open.go, counted by recorder.go), the overload measurement (Overload:
// overload.go, commits.go), the in-flight cap's occupancy (Inflight:
// inflight.go), the API calls around them (api.go) and their reports
// (report.go). A Config says what to run; the command's flags, their
// checks and the exit status are cmd/permitd's (bench.go).
package bench
