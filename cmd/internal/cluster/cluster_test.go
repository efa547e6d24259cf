package cluster

import (
	"math"
	"os"
	"strings"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	if c, err := ParseStatCPU("123 (a b) c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0", 100); err != nil || math.Abs(c-3) > 1e-12 {
		t.Errorf("ParseStatCPU = %v, %v, want 3", c, err)
	}
	if _, err := ParseStatCPU("123 (a) S 1 2", 100); err == nil {
		t.Error("ParseStatCPU of a short line: no error")
	}
}

func TestParseStatusMemory(t *testing.T) {
	m, err := ParseStatusMemory("Name:\tpermitd\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t9\n")
	if err != nil || m.RSSBytes != 100<<20 || m.HWMBytes != 200<<20 {
		t.Fatalf("ParseStatusMemory = %+v, %v; want RSS 100 MiB, HWM 200 MiB", m, err)
	}
	if _, err := ParseStatusMemory("Name:\tx\nVmRSS:\t1 kB\n"); err == nil || !strings.Contains(err.Error(), "VmHWM") {
		t.Errorf("no VmHWM: %v, want an error naming it", err)
	}
	// This process's own status parses.
	if m, err := MemoryOf(os.Getpid()); err != nil || m.RSSBytes <= 0 || m.HWMBytes < m.RSSBytes {
		t.Errorf("MemoryOf(self) = %+v, %v", m, err)
	}
}
