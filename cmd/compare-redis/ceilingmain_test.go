package main

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets the test binary be the nethttp peer's server, as the
// program is when the comparison starts it (startCeiling runs
// os.Executable, which under go test is this binary).
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == serveCeilingArg {
		if err := serveCeiling(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}
