package server

import (
	"strings"
	"testing"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/server/fakestore"
)

// The node and the fake both implement Store.
var (
	_ Store = (*node.Node)(nil)
	_ Store = (*fakestore.Store)(nil)
)

// TestNameRuleMatchesFSM: the handler accepts exactly the names the FSM
// accepts, so a name is never refused late.
func TestNameRuleMatchesFSM(t *testing.T) {
	if MaxNameLen != fsm.MaxNameLen || MaxRequestIDLen != fsm.MaxRequestIDLen {
		t.Fatalf("bounds differ from fsm: %d/%d vs %d/%d", MaxNameLen, MaxRequestIDLen, fsm.MaxNameLen, fsm.MaxRequestIDLen)
	}
	names := []string{"", "a", "A-z_0.9:x", strings.Repeat("n", 128), strings.Repeat("n", 129), "a b", "a/b", "é", "a\x00"}
	for c := 0; c < 256; c++ {
		names = append(names, "x"+string(rune(c)), string([]byte{byte(c)}))
	}
	for _, n := range names {
		ours, theirs := api.ValidateName("limit name", n) == nil, fsm.ValidateName(n) == nil
		if ours != theirs {
			t.Errorf("name %q: transport accepts %v, fsm accepts %v", n, ours, theirs)
		}
		if api.ValidateRequestID(n) == nil && fsm.ValidateRequestID(n) != nil {
			t.Errorf("request id %q accepted here, refused by fsm", n)
		}
	}
}
