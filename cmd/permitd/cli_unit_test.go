package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// testCmdLine is a command with one argument NAME and a few flags.
func testCmdLine() (*cmdLine, *bytes.Buffer, *bytes.Buffer, *float64, *time.Duration, *bool) {
	var stdout, stderr bytes.Buffer
	c := newCmdLine("t", "t NAME", "A test command.\n", &stdout, &stderr)
	c.args("NAME")
	var rate float64
	var per time.Duration
	var wait bool
	c.Float(&rate, "rate", "R", 0, "rate").Check(positive, "a number > 0")
	c.Duration(&per, "per", time.Second, durPositive, "period")
	c.Bool(&wait, "wait", false, "wait")
	return c, &stdout, &stderr, &rate, &per, &wait
}

func TestParseInterleavesFlagsAndArguments(t *testing.T) {
	for _, args := range [][]string{
		{"api", "--rate", "2", "--per", "6s", "--wait"},
		{"--rate", "2", "api", "--per", "6s", "--wait"},
		{"--rate=2", "--per=6s", "--wait", "api"},
		{"-rate", "2", "-per", "6s", "-wait=true", "--", "api"},
	} {
		c, _, stderr, rate, per, wait := testCmdLine()
		if ok, code := c.parse(args); !ok || code != 0 {
			t.Fatalf("%q: %d %s", args, code, stderr)
		}
		if c.arg(0) != "api" || *rate != 2 || *per != 6*time.Second || !*wait {
			t.Fatalf("%q: %q %v %v %v", args, c.pos, *rate, *per, *wait)
		}
	}
	c, _, stderr, _, _, _ := testCmdLine()
	if ok, _ := c.parse([]string{"--", "--rate"}); !ok || c.arg(0) != "--rate" {
		t.Fatalf("after --: %q %s", c.pos, stderr)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"api", "oops"}, `permitd t: unexpected argument "oops" (see permitd t --help)`},
		{[]string{"--rate", "1"}, "permitd t: missing argument NAME (see permitd t --help)"},
		{[]string{"api", "--", "--rate"}, `unexpected argument "--rate" (after "--" every word is an argument)`},
		{[]string{"api", "--wait", "false"}, `unexpected argument "false" (a boolean flag takes its value after "=", as in --wait=false)`},
		{[]string{"api", "true"}, `unexpected argument "true" (see`},
		{[]string{"api", "--rat", "1"}, "unknown flag --rat (did you mean --rate?)"},
		{[]string{"api", "--zzzzzz"}, "unknown flag --zzzzzz (see"},
		{[]string{"api", "--rate"}, "flag --rate needs a value"},
		{[]string{"api", "--rate", "--per", "1s"}, "flag --rate needs a value (got the flag --per)"},
		{[]string{"api", "--per", "60"}, `--per "60" is not a duration: a number needs a unit, such as "60s" or "60ms"`},
		{[]string{"api", "--per", "1.5"}, `such as "1.5s" or "1.5ms"`},
		{[]string{"api", "--per", "soon"}, `--per "soon" is not a duration; allowed: a Go duration string > 0`},
		{[]string{"api", "--rate", "1e400"}, `--rate "1e400" is not a finite number`},
		{[]string{"api", "--wait=2"}, `--wait "2" is not a boolean; allowed: true or false`},
	} {
		c, stdout, stderr, _, _, _ := testCmdLine()
		ok, code := c.parse(tc.args)
		if ok || code != exitUsage || stdout.Len() != 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: ok %v code %d stdout %q stderr %q; want %q", tc.args, ok, code, stdout, stderr, tc.want)
		}
	}
}

func TestParseHelp(t *testing.T) {
	c, stdout, stderr, _, _, _ := testCmdLine()
	ok, code := c.parse([]string{"api", "--help"})
	if ok || code != 0 || stderr.Len() != 0 {
		t.Fatalf("--help: %v %d %q", ok, code, stderr)
	}
	want := "Usage: permitd t NAME\n\nA test command.\n\nFlags:\n  --rate R\n        rate\n  --per duration\n        period (default 1s)\n  --wait\n        wait\n"
	if stdout.String() != want {
		t.Fatalf("usage:\n%s\nwant:\n%s", stdout, want)
	}
}

func TestClosest(t *testing.T) {
	for _, tc := range []struct{ s, want string }{
		{"algoritm", "algorithm"}, {"per", "per"}, {"pre", ""}, {"servres", "servers"}, {"xyz", ""}, {"limit", "limits"},
	} {
		if got := closest(tc.s, []string{"algorithm", "per", "servers", "limits", "rate"}); got != tc.want {
			t.Errorf("closest(%q) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

// TestWorkersSpreadOverTheServers: workers given the same --servers start
// at different nodes, each at the one its name picks every time, and keep
// every server in the list's order after it.
func TestWorkersSpreadOverTheServers(t *testing.T) {
	const servers = "a:1,b:2,c:3"
	first := map[string]int{}
	for i := range 300 {
		name := fmt.Sprintf("g.127.0.0.1:%d", 7000+i)
		got := spreadServers(servers, name)
		if again := spreadServers(servers, name); again != got {
			t.Fatalf("%s: %q then %q", name, got, again)
		}
		switch got {
		case "a:1,b:2,c:3", "b:2,c:3,a:1", "c:3,a:1,b:2":
		default:
			t.Fatalf("%s: %q is not a rotation of %q", name, got, servers)
		}
		first[got[:3]]++
	}
	for _, s := range []string{"a:1", "b:2", "c:3"} {
		if first[s] < 60 {
			t.Errorf("%d of 300 workers start at %s, want about 100: %v", first[s], s, first)
		}
	}
	if got := spreadServers("a:1", "w"); got != "a:1" {
		t.Errorf("one server: %q", got)
	}
}

// TestWorkerStartsPastTheLeader: a worker whose first server is the
// register's leader starts at the next one; a follower first, a status
// that cannot be read, or a single server leave the list as it is.
func TestWorkerStartsPastTheLeader(t *testing.T) {
	serve := func(state string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/status" {
				http.NotFound(w, r)
				return
			}
			fmt.Fprintf(w, `{"id":"n","state":%q,"ready":true}`, state)
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	leader, follower := serve("leader"), serve("follower")
	dead := "127.0.0.1:1"
	for _, tc := range []struct{ servers, want string }{
		{leader + "," + follower + "," + dead, follower + "," + dead + "," + leader},
		{follower + "," + leader, follower + "," + leader},
		{dead + "," + leader, dead + "," + leader},
		{leader, leader},
	} {
		cl, err := newClient(tc.servers)
		if err != nil {
			t.Fatal(err)
		}
		if got := pastTheLeader(cl, tc.servers); got != tc.want {
			t.Errorf("servers %s: %s, want %s", tc.servers, got, tc.want)
		}
		cl.Close()
	}
}

// TestAdvertisedHTTP: the HTTP address the other nodes learn is
// --advertise-http, else the listening address with a wildcard host
// replaced by the host of the raft address the other nodes dial.
func TestAdvertisedHTTP(t *testing.T) {
	for _, tc := range []struct {
		a         agentFlags
		listening string
		want      string
	}{
		{agentFlags{raftAddr: "127.0.0.1:7001"}, "127.0.0.1:8001", "127.0.0.1:8001"},
		{agentFlags{raftAddr: "10.0.0.1:7001"}, "0.0.0.0:8001", "10.0.0.1:8001"},
		{agentFlags{raftAddr: "0.0.0.0:7001", advertise: "db1.example:7001"}, "[::]:8001", "db1.example:8001"},
		{agentFlags{raftAddr: "10.0.0.1:7001", advertiseHTTP: "api1.example:443"}, "0.0.0.0:8001", "api1.example:443"},
	} {
		if got := advertisedHTTP(tc.a, tc.listening); got != tc.want {
			t.Errorf("%+v listening on %s: advertised %q, want %q", tc.a, tc.listening, got, tc.want)
		}
	}
}
