//go:build race

package main

// raceBuildFlags: the test binary has the race detector, and so does the
// agent it builds.
var raceBuildFlags = []string{"-race"}
