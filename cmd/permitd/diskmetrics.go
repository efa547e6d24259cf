package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// registerDataDirMetrics registers, on reg, the free and total space of
// the file system holding the agent's data directory, read at scrape time
// (statfs): the raft log and snapshots live there, and a full disk stops
// the node's writes. -1 when it cannot be read.
//
//	permitd_data_dir_available_bytes  space an unprivileged process may still use
//	permitd_data_dir_size_bytes       the file system's size
func registerDataDirMetrics(reg prometheus.Registerer, dataDir string) {
	read := func(v func(st *unix.Statfs_t) float64) func() float64 {
		return func() float64 {
			var st unix.Statfs_t
			if err := unix.Statfs(dataDir, &st); err != nil {
				return -1
			}
			return v(&st)
		}
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "permitd_data_dir_available_bytes",
			Help: "Space an unprivileged process may still use on the file system of --data-dir (-1: statfs failed)."},
			read(func(st *unix.Statfs_t) float64 { return float64(st.Bavail) * float64(st.Bsize) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "permitd_data_dir_size_bytes",
			Help: "Size of the file system of --data-dir (-1: statfs failed)."},
			read(func(st *unix.Statfs_t) float64 { return float64(st.Blocks) * float64(st.Bsize) })),
	)
}
