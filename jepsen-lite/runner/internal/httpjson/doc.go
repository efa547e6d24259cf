// Package httpjson is the one way the runner's packages talk JSON over
// HTTP to the processes they run: the agents' API and test hooks
// (package cluster) and the worker sidecars' control endpoints (package
// workload). One request, one bounded timeout, no retries: a paused or
// killed process must not stall the runner. A Client reaches the agents
// of a secure run over HTTPS with a bearer token.
package httpjson
