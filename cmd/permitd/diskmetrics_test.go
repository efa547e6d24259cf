package main

import (
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"
)

// TestDataDirMetrics: the data directory's file system is read at scrape
// time (its size, and what is available, as statfs says); a directory
// that cannot be read gives -1, not 0 (which would read as a full disk).
func TestDataDirMetrics(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	registerDataDirMetrics(reg, dir)
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
	}
	size, avail := float64(st.Blocks)*float64(st.Bsize), float64(st.Bavail)*float64(st.Bsize)
	if got["permitd_data_dir_size_bytes"] != size || size <= 0 {
		t.Errorf("permitd_data_dir_size_bytes %v, want statfs's %v", got["permitd_data_dir_size_bytes"], size)
	}
	// What is available moves with the machine's other writers: within 1 GiB.
	if a := got["permitd_data_dir_available_bytes"]; a < 0 || a > size || a < avail-(1<<30) || a > avail+(1<<30) {
		t.Errorf("permitd_data_dir_available_bytes %v, want about statfs's %v (of %v)", a, avail, size)
	}

	gone := prometheus.NewRegistry()
	registerDataDirMetrics(gone, filepath.Join(dir, "missing"))
	if n, err := testutil.GatherAndCount(gone); err != nil || n != 2 {
		t.Fatalf("gathered %d series (%v), want 2", n, err)
	}
	mfs, _ = gone.Gather()
	for _, mf := range mfs {
		if v := mf.GetMetric()[0].GetGauge().GetValue(); v != -1 {
			t.Errorf("%s = %v for a missing directory, want -1", mf.GetName(), v)
		}
	}
}
