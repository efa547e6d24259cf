package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

func init() {
	register("version", "print the version, revision, Go version and platform", runVersion)
}

// version is set at build time:
//
//	go build -ldflags "-X main.version=1.2.3" ./cmd/permitd
//
// Without it, the module version (a tagged "go install") or "devel" is
// reported.
var version string

// buildInfo is what permitd version prints and permitd_build_info labels.
type buildInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
}

// readBuildInfo combines -X main.version with the build's module and
// VCS information.
func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Revision: "unknown", GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("version", "version [--json]", `
Prints permitd's version (set at build time with -ldflags "-X main.version=V",
else the module version, else "devel"), the VCS revision it was built from
("+modified" if the tree had changes), the Go version and the platform.

Exit status: 0 ok; 2 usage error.
`, stdout, stderr)
	var jsonOut bool
	c.Bool(&jsonOut, "json", false, "print JSON")
	if ok, code := c.parse(args); !ok {
		return code
	}
	b := readBuildInfo()
	if jsonOut {
		printJSON(stdout, b)
		return exitOK
	}
	rev := b.Revision
	if b.Modified {
		rev += "+modified"
	}
	fmt.Fprintf(stdout, "permitd %s (revision %s) %s %s/%s\n", b.Version, rev, b.GoVersion, b.OS, b.Arch)
	return exitOK
}

// registerProcessMetrics registers, on reg, permitd_build_info (a gauge of
// 1 labelled with the version, Go version and revision) and the Go
// runtime and process collectors (go_*, process_*).
func registerProcessMetrics(reg prometheus.Registerer) {
	b := readBuildInfo()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "permitd_build_info",
		Help:        "A metric with a constant '1' value labelled by the version, Go version and VCS revision permitd was built from.",
		ConstLabels: prometheus.Labels{"version": b.Version, "goversion": b.GoVersion, "revision": b.Revision},
	})
	info.Set(1)
	reg.MustRegister(info, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}
