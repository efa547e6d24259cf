//go:build !race

package main

// raceBuildFlags: the test binary has no race detector, nor does the agent
// it builds.
var raceBuildFlags []string
