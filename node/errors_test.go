package node

import (
	"errors"
	"fmt"
	"testing"
)

func TestMessageDropsRepeatedPrefixes(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{userErrorf(ErrNotFound, "limit %q not found", "ap"), `limit "ap" not found`},
		{fmt.Errorf("%w: %w", ErrInvalid, errors.New(`fsm: invalid command: limit name "a b" has byte ' '`)), `limit name "a b" has byte ' '`},
		{fmt.Errorf("%w: %s", ErrNoLeader, "node: no leader reachable: no leader known"), "no leader known"},
		{errors.New("plain"), "plain"},
	} {
		if got := Message(tt.err); got != tt.want {
			t.Errorf("Message(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	// A forwarded error is rebuilt from the leader's message once.
	if got := Message(errOf(2, Message(userErrorf(ErrInvalid, "5 permits: too many")))); got != "5 permits: too many" {
		t.Errorf("forwarded message %q", got)
	}
}

func TestDidYouMean(t *testing.T) {
	known := []string{"api", "apis", "llm", "pai", "zzz"}
	for _, tt := range []struct{ name, want string }{
		{"ap", `; did you mean "api"?`},
		{"apj", `; did you mean "api"?`},
		{"aip", `; did you mean "api"?`},
		{"apiss", `; did you mean "apis"?`},
		{"lm", `; did you mean "llm"?`},
		{"api", `; did you mean "apis" or "pai"?`},
		{"nothing", ""},
	} {
		if got := didYouMean(tt.name, known); got != tt.want {
			t.Errorf("didYouMean(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
