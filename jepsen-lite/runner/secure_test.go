package runner

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/permitd/permitd/jepsen-lite/checker"
)

// TestCheckSecureListeners: every agent must log a listener, each with
// tls=true and tokens=true; a plain run is not checked.
func TestCheckSecureListeners(t *testing.T) {
	const (
		secureLine = "2026-01-01T00:00:00Z [INFO]  permitd: listening: id=n1 http_addr=127.0.0.11:1 raft_addr=127.0.0.11:2 tls=true client_cert_auth=false tokens=true version=devel"
		plainLine  = "2026-01-01T00:00:00Z [INFO]  permitd: listening: id=n2 http_addr=127.0.0.12:1 raft_addr=127.0.0.12:2 tls=false client_cert_auth=false tokens=false version=devel"
	)
	logs := []checker.Log{
		{Name: "n1.log", Text: "=== jepsen-lite: starting n1\n" + secureLine + "\nkilled\n" + secureLine + "\n"},
		{Name: "n2.log", Text: secureLine + "\n" + plainLine + "\n"},
		{Name: "n3.log", Text: "=== jepsen-lite: starting n3\nexited\n"},
	}
	if errs := checkSecureListeners(logs, nil); errs != nil {
		t.Fatalf("plain run: %v", errs)
	}
	sec := &SecurityReport{AgentListeners: map[string]int{}}
	errs := checkSecureListeners(logs, sec)
	if want := map[string]int{"n1": 2, "n2": 1, "n3": 0}; !reflect.DeepEqual(sec.AgentListeners, want) {
		t.Errorf("listeners %v, want %v", sec.AgentListeners, want)
	}
	if len(errs) != 2 || !strings.Contains(errs[0], "agent n2 listened without TLS or tokens") || !strings.Contains(errs[1], "agent n3 never logged") {
		t.Errorf("errors %q", errs)
	}
}

// TestSecureConfigJSON: a plain run's configuration encodes as before
// (no "secure" key); a secure one says so.
func TestSecureConfigJSON(t *testing.T) {
	plain, err := json.Marshal(Config{OutDir: "x"})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := json.Marshal(Config{OutDir: "x", Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), "secure") || !strings.Contains(string(sec), `"secure":true`) {
		t.Fatalf("plain %s\nsecure %s", plain, sec)
	}
}
