package node

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
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

// Looking up a name's one-edit variants finds exactly the names a scan
// with oneEditApart finds, whatever the names (random ones, near and far,
// over the whole alphabet and lengths up to a name's longest): a large
// register suggests what a small one would.
func TestOneEditVariantsFindWhatAScanFinds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 41))
	randName := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = nameAlphabet[rng.IntN(4)] // few letters: many near names
		}
		return string(b)
	}
	for round := range 300 {
		name := randName(1 + rng.IntN(6))
		if round%50 == 0 {
			name = randName(fsm.MaxNameLen)
		}
		known := map[string]bool{}
		for range 200 {
			k := randName(1 + rng.IntN(7))
			if round%50 == 0 {
				k = name[:len(name)-1] + string(nameAlphabet[rng.IntN(len(nameAlphabet))])
			}
			known[k] = true
		}
		var scan []string
		for k := range known {
			if oneEditApart(name, k) {
				scan = append(scan, k)
			}
		}
		var found []string
		variants := 0
		oneEditVariants(name, func(v []byte) bool {
			variants++
			if known[string(v)] {
				found = append(found, string(v))
			}
			return true
		})
		slices.Sort(scan)
		slices.Sort(found)
		found = slices.Compact(found)
		if !slices.Equal(scan, found) {
			t.Fatalf("name %q: a scan finds %v, the variants %v", name, scan, found)
		}
		if max := (len(name)+1)*len(nameAlphabet) + len(name)*len(nameAlphabet) + len(name); variants > max {
			t.Fatalf("name %q: %d variants, more than %d", name, variants, max)
		}
	}
}

// Beyond scanNamesUpTo limits the suggestion comes from the variants'
// lookups, and is the one a scan gives.
func TestLimitNotFoundSuggestsAmongManyLimits(t *testing.T) {
	n := &Node{fsm: fsm.New()}
	cfg := strictConfig(t, time.Second, 1)
	for i := range scanNamesUpTo + 10 {
		b, err := fsm.AppendPut(nil, fsm.Stamp{Nanos: 1, Term: 1}, fsm.PutLimit{Name: fmt.Sprintf("k%05d", i), Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if res, ok := n.fsm.Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Data: b}).(fsm.PutResult); !ok {
			t.Fatalf("put %d: %v", i, res)
		}
	}
	if n.fsm.LimitCount() <= scanNamesUpTo {
		t.Fatalf("%d limits: not beyond the scan", n.fsm.LimitCount())
	}
	for name, want := range map[string]string{
		"k0001":  `; did you mean "k00001" or "k00010" or "k00011"?`,
		"k00x01": `; did you mean "k00001" or "k00101" or "k00201"?`,
		"zzz":    "",
	} {
		if got := Message(n.limitNotFound(name)); got != fmt.Sprintf("limit %q not found%s", name, want) {
			t.Errorf("%s: %q, want the suggestion %q", name, got, want)
		}
	}
}

// BenchmarkLimitNotFound: the error (and suggestion) of a reserve naming
// an unknown limit among 100 000, a 12-byte name:
//
//	go test ./node -run '^$' -bench LimitNotFound -benchmem
func BenchmarkLimitNotFound(b *testing.B) {
	n := &Node{fsm: fsm.New()}
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 100_000 {
		p, err := fsm.AppendPut(nil, fsm.Stamp{Nanos: 1, Term: 1}, fsm.PutLimit{Name: fmt.Sprintf("acct:%07d", i), Config: cfg})
		if err != nil {
			b.Fatal(err)
		}
		n.fsm.Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Data: p})
	}
	b.ResetTimer()
	for b.Loop() {
		if err := n.limitNotFound("acct:00x0042"); !errors.Is(err, ErrNotFound) {
			b.Fatal(err)
		}
	}
}
