package server

import (
	"testing"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/client"
)

// TestBoundsAreTheRegisters: the bounds the HTTP API and the Go client
// check before anything reaches the register are the register's.
func TestBoundsAreTheRegisters(t *testing.T) {
	for _, c := range []struct {
		what           string
		client, server int64
	}{
		{"API name length", MaxNameLen, fsm.MaxNameLen},
		{"API request id length", MaxRequestIDLen, fsm.MaxRequestIDLen},
		{"name length", client.MaxNameLen, fsm.MaxNameLen},
		{"demand", client.MaxDemandMilliPerSec, fsm.MaxDemandMilliPermitsPerSec},
		{"weight", client.MaxLeaseWeight, fsm.MaxLeaseWeight},
		{"min TTL", int64(client.MinLeaseTTL), fsm.MinLeaseTTLNanos},
		{"max TTL", int64(client.MaxLeaseTTL), fsm.MaxLeaseTTLNanos},
	} {
		if c.client != c.server {
			t.Errorf("%s: the client allows %d, the register %d", c.what, c.client, c.server)
		}
	}
	for _, name := range []string{"a", "api.v1:x_y-z", "", "a b", "é", string(make([]byte, 129)), "x/y"} {
		cerr, serr := client.ValidateName("limit name", name), fsm.ValidateName(name)
		if (cerr == nil) != (serr == nil) {
			t.Errorf("name %q: client says %v, register %v", name, cerr, serr)
		}
	}
}
