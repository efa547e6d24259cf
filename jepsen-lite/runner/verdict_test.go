package runner

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/permitd/permitd/jepsen-lite/checker"
)

// TestVerdictAndExitCode: the README's exit table. A safety violation is
// unsafe (1) even when the run also had errors or did not recover; errors
// or no checker at all make the run incomplete (3), never valid; a failed
// recovery alone is "not recovered" (4); summary.json carries the same.
func TestVerdictAndExitCode(t *testing.T) {
	ok := checker.Result{Name: "spacing", Valid: true}
	bad := checker.Result{Name: "spacing", Valid: false}
	rec := checker.Result{Name: "recovery", Valid: false}
	for _, tc := range []struct {
		name    string
		sum     Summary
		verdict string
		code    int
	}{
		{"valid", Summary{Checkers: []checker.Result{ok}, SafetyValid: true, LivenessValid: true}, "valid", ExitValid},
		{"unsafe", Summary{Checkers: []checker.Result{bad}, LivenessValid: true}, "unsafe", ExitSafety},
		{"unsafe beats errors and liveness", Summary{Checkers: []checker.Result{bad, rec}, Errors: []string{"x"}}, "unsafe", ExitSafety},
		{"errors", Summary{Checkers: []checker.Result{ok}, SafetyValid: true, LivenessValid: true, Errors: []string{"agent n2 never ready"}}, "incomplete", ExitHarness},
		{"no checker ran", Summary{SafetyValid: true, LivenessValid: true}, "incomplete", ExitHarness},
		{"errors beat liveness", Summary{Checkers: []checker.Result{ok, rec}, SafetyValid: true, Errors: []string{"x"}}, "incomplete", ExitHarness},
		{"not recovered", Summary{Checkers: []checker.Result{ok, rec}, SafetyValid: true}, "not recovered", ExitLiveness},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := &run{cfg: Config{OutDir: dir, Workload: WorkloadStrict, Nodes: 3}, log: io.Discard}
			sum := tc.sum
			sum.Config = r.cfg
			r.finish(&sum)
			if sum.Verdict != tc.verdict || sum.ExitCode != tc.code {
				t.Fatalf("verdict %q exit %d; want %q exit %d", sum.Verdict, sum.ExitCode, tc.verdict, tc.code)
			}
			b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Verdict  string `json:"verdict"`
				ExitCode int    `json:"exit_code"`
			}
			if err := json.Unmarshal(b, &got); err != nil || got.Verdict != tc.verdict || got.ExitCode != tc.code {
				t.Fatalf("summary.json verdict %q exit %d (%v); want %q %d", got.Verdict, got.ExitCode, err, tc.verdict, tc.code)
			}
			if _, err := os.Stat(filepath.Join(dir, "index.html")); err != nil {
				t.Fatal(err)
			}
		})
	}
}
