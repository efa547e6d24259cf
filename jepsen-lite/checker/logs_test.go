package checker

import (
	"strings"
	"testing"
)

func TestLogs(t *testing.T) {
	clean := Log{Name: "a1.log", Text: "2024 [INFO] raft: election won\n2024 [WARN] heartbeat failed\n"}
	tests := []struct {
		name  string
		logs  []Log
		valid bool
		want  string
	}{
		{"clean", []Log{clean, {Name: "empty.log"}}, true, ""},
		{"panic", []Log{clean, {Name: "a2.log", Text: "ok\npanic: runtime error: index out of range\ngoroutine 1"}}, false, `a2.log:2: "panic:"`},
		{"race", []Log{{Name: "a3.log", Text: "==================\nWARNING: DATA RACE\nRead at"}}, false, `a3.log:2: "DATA RACE"`},
		{"fatal", []Log{{Name: "w.log", Text: "fatal error: concurrent map writes"}}, false, `w.log:1: "fatal error:"`},
		{"long line", []Log{{Name: "big.log", Text: strings.Repeat("x", 100<<10) + "panic: late"}}, false, "big.log:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Logs(tt.logs, nil)
			expect(t, r, err, tt.valid, tt.want)
		})
	}
	r, err := Logs([]Log{{Name: "x", Text: "boom here"}}, []string{"boom"})
	expect(t, r, err, false, "x:1")
	if _, err := Logs(nil, []string{""}); err == nil {
		t.Fatal("empty pattern accepted")
	}
}

func TestResultBoundsViolations(t *testing.T) {
	r := newResult("x")
	for i := range MaxViolations + 5 {
		r.violate("v%d", i)
	}
	if len(r.Violations) != MaxViolations || r.ViolationsTotal() != MaxViolations+5 || r.Valid {
		t.Fatalf("%d listed, %d total, valid %v", len(r.Violations), r.ViolationsTotal(), r.Valid)
	}
	if s := r.String(); !strings.Contains(s, "INVALID (25 violations): v0") {
		t.Fatalf("String = %q", s)
	}
	if s := newResult("y").String(); s != "y: valid" {
		t.Fatalf("String = %q", s)
	}
}
