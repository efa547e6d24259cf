package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestReservationCLI is the black-box suite of the reservation commands
// against a real one-node cluster: reserve --limit (all or nothing),
// settle, release, and limits put of concurrency and shadow limits,
// checking exit statuses, stdout and stderr as TestCLI does.
func TestReservationCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster")
	}
	bin := buildPermitd(t)
	n1 := startLoneAgent(t, bin)
	all := serversOf(n1)
	cli := func(t *testing.T, args ...string) cliResult {
		t.Helper()
		return runCLI(t, bin, nil, append(args, "--servers", all)...)
	}
	wantCode(t, cli(t, "status", "--wait", "30s"), 0)

	// answer decodes a reserve's one JSON line.
	type answer struct {
		Granted       *bool  `json:"granted"`
		ReservationID string `json:"reservation_id"`
		WaitNs        *int64 `json:"wait_ns"`
		ExpiresInNs   *int64 `json:"expires_in_ns"`
		Holds         bool   `json:"holds"`
		HoldEndNs     *int64 `json:"hold_expires_in_ns"`
		RetryAfterNs  int64  `json:"retry_after_ns"`
		Blocking      string `json:"blocking"`
		Error         string `json:"error"`
		Limits        []struct {
			Name    string `json:"name"`
			Permits int64  `json:"permits"`
		} `json:"limits"`
	}
	oneLine := func(t *testing.T, r cliResult) answer {
		t.Helper()
		var a answer
		if strings.Count(r.stdout, "\n") != 1 || json.Unmarshal([]byte(r.stdout), &a) != nil || a.Granted == nil {
			t.Fatalf("want one JSON answer line: %v", r)
		}
		return a
	}

	wantCode(t, cli(t, "limits", "put", "rpm", "--algorithm", "strict", "--rate", "1", "--per", "1h"), 0)
	wantCode(t, cli(t, "limits", "put", "tpm", "--algorithm", "bursty", "--rate", "10000", "--per", "1s", "--max-burst-seconds", "1"), 0)

	var id string
	t.Run("reserve --limit grants every limit at once and names the reservation", func(t *testing.T) {
		r := cli(t, "reserve", "--limit", "rpm=1", "--limit", "tpm=4000", "--max-wait", "2s", "--settle-within", "5m")
		wantCode(t, r, 0)
		a := oneLine(t, r)
		if !*a.Granted || a.ReservationID == "" || a.WaitNs == nil || *a.WaitNs < 0 || *a.WaitNs > int64(2*time.Second) ||
			a.ExpiresInNs == nil || len(a.Limits) != 2 || a.Limits[0].Name != "rpm" || a.Limits[1].Permits != 4000 || r.stderr != "" {
			t.Fatalf("want a grant with a reservation id: %v", r)
		}
		id = a.ReservationID
	})

	t.Run("reserve --limit refused: exit 3, the blocking limit, nothing reserved", func(t *testing.T) {
		before := cli(t, "limits", "get", "tpm", "--json")
		r := cli(t, "reserve", "--limit", "tpm=1", "--limit", "rpm=1", "--max-wait", "1s")
		wantCode(t, r, exitRefused)
		a := oneLine(t, r)
		if *a.Granted || a.ReservationID != "" || a.Blocking != "rpm" || a.RetryAfterNs < int64(50*time.Minute) ||
			!strings.Contains(a.Error, `limit "rpm" blocks`) {
			t.Fatalf("want a refusal naming rpm, retry after near an hour: %v", r)
		}
		if r.elapsed > 30*time.Second {
			t.Fatalf("the refusal took %v", r.elapsed)
		}
		// All or nothing: tpm granted nothing.
		after := cli(t, "limits", "get", "tpm", "--json")
		if g := grantedPermits(t, before); g != grantedPermits(t, after) {
			t.Fatalf("a refused reserve changed tpm's grants: %v then %v", before, after)
		}
		// --wait never sleeps on a refusal.
		wantCode(t, cli(t, "reserve", "--limit", "rpm=1", "--wait"), exitRefused)
	})

	t.Run("the server's own refusal of a reserve is a usage error", func(t *testing.T) {
		r := cli(t, "reserve", "--limit", "rpm=2", "--limit", "tpm=1", "--max-wait", "1s")
		wantCode(t, r, exitUsage)
		if r.stdout != "" || !strings.Contains(r.stderr, `limit "rpm" can grant at most 1`) {
			t.Fatalf("want the server's reason: %v", r)
		}
		wantCode(t, cli(t, "limits", "put", "paced", "--algorithm", "strict", "--rate", "10", "--max-reserved", "5"), 0)
		r = cli(t, "reserve", "--limit", "paced=2", "--limit", "tpm=1", "--max-wait", "1s")
		wantCode(t, r, exitUsage)
		if r.stdout != "" || !strings.Contains(r.stderr, `"paced" is strict`) {
			t.Fatalf("want the server's reason: %v", r)
		}
		r = cli(t, "reserve", "--limit", "nosuch=1", "--limit", "tpm=1")
		wantCode(t, r, exitFailure)
		if r.stdout != "" || !strings.Contains(r.stderr, `"nosuch"`) {
			t.Fatalf("want limit not found: %v", r)
		}
	})

	t.Run("settle prints what each limit got back or was charged", func(t *testing.T) {
		r := cli(t, "settle", id, "tpm=3000")
		wantCode(t, r, 0)
		var s struct {
			Settled       bool   `json:"settled"`
			ReservationID string `json:"reservation_id"`
			Limits        []struct {
				Name     string `json:"name"`
				Reserved int64  `json:"reserved"`
				Actual   int64  `json:"actual"`
				Refunded int64  `json:"refunded"`
				Charged  int64  `json:"charged"`
			} `json:"limits"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || !s.Settled || s.ReservationID != id ||
			strings.Count(r.stdout, "\n") != 1 {
			t.Fatalf("settle: %v (%v)", r, err)
		}
		found := false
		for _, l := range s.Limits {
			if l.Name == "tpm" {
				found = true
				if l.Reserved != 4000 || l.Actual != 3000 || l.Charged != 0 || l.Refunded < 0 || l.Refunded > 1000 {
					t.Fatalf("tpm settled as %+v: %v", l, r)
				}
			}
		}
		if !found {
			t.Fatalf("no tpm in the settlement: %v", r)
		}
		// A reservation is settled once.
		r = cli(t, "settle", id, "tpm=3000")
		if r.code != exitFailure || r.stdout != "" || !strings.Contains(r.stderr, "permitd settle: ") {
			t.Fatalf("second settle: %v", r)
		}
		r = cli(t, "settle", "987654321")
		if r.code != exitFailure || r.stdout != "" || !strings.Contains(r.stderr, "404") {
			t.Fatalf("settle of an unknown reservation: %v", r)
		}
	})

	t.Run("concurrency limits: put, hold, release", func(t *testing.T) {
		r := cli(t, "limits", "put", "workers", "--algorithm", "concurrency", "--max-in-flight", "1", "--ttl", "1m")
		wantCode(t, r, 0)
		var l map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || l["algorithm"] != "concurrency" ||
			l["max_in_flight"] != float64(1) || l["ttl"] != "1m0s" || l["shadow"] != false {
			t.Fatalf("put concurrency: %v (%v)", r, err)
		}
		if _, ok := l["rate"]; ok {
			t.Fatalf("a concurrency limit printed with a rate: %v", r)
		}
		// The single-limit form cannot release what it holds: the server
		// refuses it (400), and the CLI says so as for any invalid input.
		r = cli(t, "reserve", "workers")
		wantCode(t, r, exitUsage)
		if r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "permitd reserve: ") ||
			!strings.Contains(r.stderr, `limit "workers" is an in-flight cap: reserve it in the reservation form`) ||
			!strings.Contains(r.stderr, "400 Bad Request") ||
			!strings.Contains(r.stderr, "; allowed: permitd reserve --limit workers=1, then permitd release ID") {
			t.Fatalf("reserve NAME of a concurrency limit: %v", r)
		}
		wantCode(t, cli(t, "limits", "put", "rps", "--algorithm", "strict", "--rate", "1", "--per", "1s"), 0)
		a := oneLine(t, cli(t, "reserve", "--limit", "workers=1", "--limit", "rps=1", "--max-wait", "1s"))
		// The hold's end, from the line's printing: within the TTL, and
		// past the strict permit's expiry (half a second).
		if !*a.Granted || a.ReservationID == "" || !a.Holds || a.HoldEndNs == nil || *a.HoldEndNs <= int64(50*time.Second) ||
			*a.HoldEndNs > int64(time.Minute) || *a.ExpiresInNs >= *a.HoldEndNs {
			t.Fatalf("first hold: %+v", a)
		}
		r = cli(t, "reserve", "--limit", "workers=1")
		wantCode(t, r, exitRefused)
		if b := oneLine(t, r); *b.Granted || b.Blocking != "workers" {
			t.Fatalf("second hold: %v", r)
		}
		r = cli(t, "release", a.ReservationID)
		wantCode(t, r, 0)
		if r.stdout != `{"duplicate":false,"released":1,"reservation_id":"`+a.ReservationID+`"}`+"\n" {
			t.Fatalf("release: %v", r)
		}
		r = cli(t, "release", a.ReservationID)
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, `"duplicate":true,"released":0`) {
			t.Fatalf("second release: %v", r)
		}
		wantCode(t, cli(t, "reserve", "--limit", "workers=1"), 0)
		r = cli(t, "limits", "list", "--json")
		wantCode(t, r, 0)
		var ls []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &ls); err != nil {
			t.Fatalf("list: %v (%v)", r, err)
		}
		for _, l := range ls {
			if l["name"] == "workers" && (l["max_in_flight"] != float64(1) || l["ttl"] != "1m0s") {
				t.Fatalf("list shows workers as %v", l)
			}
		}
	})

	t.Run("shadow limits grant and count", func(t *testing.T) {
		r := cli(t, "limits", "put", "sh", "--algorithm", "strict", "--rate", "1", "--per", "1h", "--shadow")
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, `"shadow": true`) {
			t.Fatalf("put --shadow: %v", r)
		}
		for range 3 {
			wantCode(t, cli(t, "reserve", "sh"), 0)
		}
		wantCode(t, cli(t, "reserve", "--limit", "sh=1", "--limit", "tpm=1", "--max-wait", "1s"), 0)
		r = cli(t, "limits", "get", "sh", "--json")
		wantCode(t, r, 0)
		var l struct {
			Shadow            bool   `json:"shadow"`
			ShadowWouldRefuse uint64 `json:"shadow_would_refuse"`
			ShadowWouldWait   uint64 `json:"shadow_would_wait"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || !l.Shadow || l.ShadowWouldRefuse+l.ShadowWouldWait < 3 {
			t.Fatalf("want shadow counters of 3 reserves an enforced limit would not have granted now: %v (%v)", r, err)
		}
		// A put without --shadow enforces the limit again.
		r = cli(t, "limits", "put", "sh", "--algorithm", "strict", "--rate", "1", "--per", "1h")
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, `"shadow": false`) {
			t.Fatalf("put without --shadow: %v", r)
		}
	})

	t.Run("bad input is one line, exit 2, and changes nothing", func(t *testing.T) {
		before := cli(t, "limits", "list", "--json")
		nine := []string{"reserve"}
		for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
			nine = append(nine, "--limit", n+"=1")
		}
		cases := []struct {
			args []string
			want string
		}{
			{[]string{"reserve", "--limit", "rpm=1", "--limit", "rpm=2"}, `--limit "rpm=2": limit "rpm" is given twice; allowed: each limit once`},
			{[]string{"reserve", "--limit", "tpm=0"}, `--limit "tpm=0": 0 permits; allowed: NAME=PERMITS, a limit name and an integer >= 1`},
			{[]string{"reserve", "--limit", "tpm=-3"}, `--limit "tpm=-3": -3 permits`},
			{[]string{"reserve", "--limit", "tpm"}, `--limit "tpm" is not NAME=PERMITS (no "="); allowed: NAME=PERMITS`},
			{[]string{"reserve", "--limit", "tpm:4000"}, `--limit "tpm:4000" is not NAME=PERMITS (no "=")`},
			{[]string{"reserve", "--limit", "tpm=lots"}, `--limit "tpm=lots": permits "lots" is not an integer; allowed: NAME=PERMITS`},
			{[]string{"reserve", "--limit", "=5"}, `--limit "=5" is not NAME=PERMITS: limit name "" has 0 characters`},
			{[]string{"reserve", "--limit", "a b=5"}, `limit name "a b" contains ' '`},
			{[]string{"reserve", "--limit"}, "flag --limit needs a value"},
			{nine, `--limit "i=1": limit 9; allowed: 1 to 8 limits`},
			{[]string{"reserve", "--limit", "rpm=1", "--permits", "2"}, "--permits goes with the NAME form; with --limit give each limit's permits as NAME=PERMITS"},
			{[]string{"reserve", "rpm", "--settle-within", "1m"}, "--settle-within goes with --limit"},
			{[]string{"reserve", "--limit", "rpm=1", "--settle-within", "11m"}, `--settle-within "11m" is out of range; allowed: a Go duration string from 1ns to 10m0s`},
			{[]string{"reserve", "--limit", "rpm=1", "--settle-within", "0s"}, `--settle-within "0s" is zero`},
			{[]string{"reserve", "rpm", "--limit", "tpm=1"}, `unexpected argument "rpm"`},
			{[]string{"settle"}, "missing argument ID"},
			{[]string{"settle", "abc"}, `reservation ID "abc"; allowed: the reservation_id a grant printed, a decimal integer >= 1`},
			{[]string{"settle", "0", "tpm=1"}, `reservation ID "0"; allowed`},
			{[]string{"settle", id, "tpm"}, `actual use "tpm" is not NAME=PERMITS (no "="); allowed: NAME=PERMITS, a limit name and an integer >= 0`},
			{[]string{"settle", id, "tpm=-1"}, `actual use "tpm=-1": -1 permits; allowed: NAME=PERMITS, a limit name and an integer >= 0`},
			{[]string{"settle", id, "tpm=1", "tpm=2"}, `actual use "tpm=2": limit "tpm" is given twice; allowed: each limit once`},
			{[]string{"settle", id, "--timeout", "0s"}, `--timeout "0s" is zero`},
			{[]string{"release"}, "missing argument ID"},
			{[]string{"release", "1", "2"}, `unexpected argument "2"`},
			{[]string{"release", "x"}, `reservation ID "x"; allowed`},
			{[]string{"limits", "put", "c", "--algorithm", "concurrency"}, "--max-in-flight is required with --algorithm concurrency; allowed: an integer from 1 to 1048576"},
			{[]string{"limits", "put", "c", "--algorithm", "concurrency", "--max-in-flight", "2", "--rate", "1"}, "--rate does not apply to a concurrency limit"},
			{[]string{"limits", "put", "c", "--algorithm", "concurrency", "--max-in-flight", "2", "--per", "1s"}, "--per does not apply to a concurrency limit"},
			{[]string{"limits", "put", "c", "--algorithm", "concurrency", "--max-in-flight", "0"}, "--max-in-flight 0 is out of range; allowed: an integer from 1 to 1048576"},
			{[]string{"limits", "put", "c", "--algorithm", "concurrency", "--max-in-flight", "2", "--ttl", "25h"}, `--ttl "25h" is out of range`},
			{[]string{"limits", "put", "c", "--algorithm", "concurrency", "--max-in-flight", "2", "--max-reserved", "1"}, "--max-reserved belongs to algorithm strict, not concurrency; allowed with concurrency: --max-in-flight or --ttl"},
			{[]string{"limits", "put", "c", "--algorithm", "strict", "--rate", "1", "--max-in-flight", "2"}, "--max-in-flight belongs to algorithm concurrency, not strict"},
			{[]string{"limits", "put", "c", "--algorithm", "fast", "--rate", "1"}, `--algorithm "fast" is not allowed; allowed: strict, bursty, warmup or hybrid (rate limits), or concurrency`},
			{[]string{"limits", "put", "c", "--algorithm", "strict", "--rate", "1", "--shadow=maybe"}, `--shadow "maybe" is not a boolean`},
		}
		var args [][]string
		for _, c := range cases {
			args = append(args, append(c.args, "--servers", all))
		}
		for i, r := range runParallel(t, bin, args) {
			wantUsageError(t, r, cases[i].want)
		}
		after := cli(t, "limits", "list", "--json")
		if stripCounters(after.stdout) != stripCounters(before.stdout) {
			t.Fatalf("the limits changed:\nbefore %s\nafter %s", before.stdout, after.stdout)
		}
	})

	t.Run("--help prints the usage on stdout, exit 0", func(t *testing.T) {
		for _, r := range runParallel(t, bin, [][]string{{"settle", "--help"}, {"release", "--help"}, {"reserve", "--help"}, {"help", "settle"}}) {
			if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, "Usage: permitd") {
				t.Errorf("want the usage on stdout, exit 0: %v", r)
			}
		}
	})
}

// grantedPermits is the granted_permits of a limits get answer.
func grantedPermits(t *testing.T, r cliResult) uint64 {
	t.Helper()
	var l struct {
		GrantedPermits *uint64 `json:"granted_permits"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &l) != nil || l.GrantedPermits == nil {
		t.Fatalf("limits get: %v", r)
	}
	return *l.GrantedPermits
}
