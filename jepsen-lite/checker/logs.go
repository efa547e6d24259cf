package checker

import (
	"bufio"
	"fmt"
	"strings"
)

// DefaultLogPatterns are the substrings Logs looks for when given none:
// a Go panic, a race detector report, a fatal runtime error.
var DefaultLogPatterns = []string{"panic:", "DATA RACE", "fatal error:"}

// Log is one log file's text.
type Log struct {
	// Name identifies the log (a file name or node name).
	Name string
	// Text is the log's content.
	Text string
}

// Logs checks that no log contains a panic, a race report or a fatal
// error: every line containing one of patterns (nil = DefaultLogPatterns)
// is a violation, reported with its log name and line number.
//
// Details: logs, lines, hits (per pattern).
func Logs(logs []Log, patterns []string) (Result, error) {
	if patterns == nil {
		patterns = DefaultLogPatterns
	}
	for _, p := range patterns {
		if p == "" {
			return Result{}, fmt.Errorf("%w: empty log pattern; allowed: non-empty substrings", ErrInvalid)
		}
	}
	r := newResult("logs")
	hits := make(map[string]int, len(patterns))
	lines := 0
	for _, l := range logs {
		sc := bufio.NewScanner(strings.NewReader(l.Text))
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for n := 1; sc.Scan(); n++ {
			lines++
			line := sc.Text()
			for _, p := range patterns {
				if strings.Contains(line, p) {
					hits[p]++
					r.violate("%s:%d: %q: %s", l.Name, n, p, clip(line, 200))
					break
				}
			}
		}
		if err := sc.Err(); err != nil {
			return Result{}, fmt.Errorf("%w: log %s: %w", ErrInvalid, l.Name, err)
		}
	}
	r.Details["logs"] = len(logs)
	r.Details["lines"] = lines
	r.Details["hits"] = hits
	r.Details["patterns"] = patterns
	return r, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
