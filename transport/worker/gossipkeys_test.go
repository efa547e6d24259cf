package worker

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// keyring parses a key file of the given keys (base64 lines).
func keyring(t *testing.T, keys ...string) *memberlist.Keyring {
	t.Helper()
	kr, err := ParseGossipKeys(strings.NewReader(strings.Join(keys, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

var (
	keyA = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	keyB = base64.RawURLEncoding.EncodeToString([]byte("fedcba9876543210"))
)

// TestParseGossipKeys: the file's rules, and errors that never repeat a
// key.
func TestParseGossipKeys(t *testing.T) {
	kr := keyring(t, "# rotation: new key second", keyA, "", keyB)
	if got := kr.GetKeys(); len(got) != 2 || string(kr.GetPrimaryKey()) != "0123456789abcdef0123456789abcdef" {
		t.Errorf("keys %d, primary %q", len(got), kr.GetPrimaryKey())
	}
	short := base64.StdEncoding.EncodeToString([]byte("short key"))
	for name, file := range map[string]string{
		"empty":      "# nothing\n\n",
		"not base64": "this is not base64!\n",
		"wrong size": short + "\n",
	} {
		_, err := ParseGossipKeys(strings.NewReader(file))
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		} else if strings.Contains(err.Error(), short) {
			t.Errorf("%s: the error repeats the key: %v", name, err)
		}
	}
}

// TestGossipKeyKeepsStrangersOut: two workers sharing a key (one already
// rotating: the new key primary, the old one still accepted) form a group
// on memberlist's MockNetwork; a process with another key and one without
// any try to join through the same seed. Neither ever becomes a member,
// what they send is dropped and counted, and no steal reaches the group.
func TestGossipKeyKeepsStrangersOut(t *testing.T) {
	reg := newFakeRegister(t, time.Now())
	reg.putLeased(testLimit, 1000, 300, 300)
	mock := &memberlist.MockNetwork{}
	type spec struct {
		name string
		keys *memberlist.Keyring
	}
	specs := []spec{
		{"a", keyring(t, keyA, keyB)},
		{"b", keyring(t, keyB, keyA)},
		{"other-key", keyring(t, base64.StdEncoding.EncodeToString([]byte("another key, 32 bytes long......")))},
		{"no-key", nil},
	}
	var seed string
	var ws []*Worker
	var links []*link
	for i, s := range specs {
		tr := mock.NewTransport(s.name)
		if i == 0 {
			ip, port, err := tr.FinalAdvertiseAddr("", 0)
			if err != nil {
				t.Fatal(err)
			}
			seed = net.JoinHostPort(ip.String(), strconv.Itoa(port))
		}
		mlc := memberlist.DefaultLocalConfig()
		mlc.Transport = tr
		l := &link{r: reg}
		w, err := New(Config{Name: s.name, Group: "g", Limit: testLimit, Register: l, Gossip: mlc, Join: []string{seed}, GossipKeys: s.keys,
			TTL: 300 * time.Millisecond, RenewEvery: 150 * time.Millisecond, RejoinEvery: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		ws, links = append(ws, w), append(links, l)
	}
	defer func() {
		// The seed last: a MockTransport dial to a stopped member blocks
		// for ever, and the others' rejoin loops dial the seed.
		for i := len(ws) - 1; i >= 0; i-- {
			_ = ws[i].Stop(context.Background())
		}
	}()
	a, b := ws[0], ws[1]
	waitFor(t, 5*time.Second, "a and b see each other, and a has dropped the strangers' messages", func() bool {
		return len(a.Status().Members["g"]) == 2 && len(b.Status().Members["g"]) == 2 && a.Stats().GossipRejected > 0
	})
	// The strangers, cut off from the register, try to steal meanwhile.
	links[2].cut.Store(true)
	links[3].cut.Store(true)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		for _, s := range ws[2:] {
			_, _ = s.TryAcquire(1, 5*time.Millisecond)
		}
		for _, w := range ws[:2] {
			if m := w.Status().Members["g"]; len(m) != 2 {
				t.Fatalf("%s sees members %v: a stranger joined", w.cfg.Name, m)
			}
		}
	}
	for _, w := range ws[:2] {
		if st := w.Stats(); st.StealsServed != 0 || st.StolenOutPermits != 0 {
			t.Errorf("%s served %d steals (%d permits) to strangers", w.cfg.Name, st.StealsServed, st.StolenOutPermits)
		}
	}
	for _, s := range ws[2:] {
		if st := s.Stats(); st.StolenInPermits != 0 {
			t.Errorf("stranger %s got %d permits from the group", s.cfg.Name, st.StolenInPermits)
		}
	}
	t.Logf("a dropped %d, b %d gossip messages", a.Stats().GossipRejected, b.Stats().GossipRejected)
}
