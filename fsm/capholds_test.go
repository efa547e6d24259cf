package fsm

import (
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

// TestCapHoldsSurviveReconfigurationAndRecreation: cap 1, a reservation
// holds its permit; whatever puts and deletes follow (another algorithm
// and back, a delete and a re-creation, a shadow switch), a second reserve
// is refused while the first is held, the first's release frees its
// permit, and then the second is granted. A hold released while the limit
// was something else is not counted by a later incarnation.
func TestCapHoldsSurviveReconfigurationAndRecreation(t *testing.T) {
	capCfg := func(t *testing.T) bucket.Config { return concurrency(t, 1, time.Minute) }
	cases := []struct {
		name string
		// between runs at 1 s, after the first reserve (held) and before
		// the second.
		between func(t *testing.T, h *harness)
	}{
		{"strict and back", func(t *testing.T, h *harness) {
			h.put(sec, "cap", strict(t, 1, 0))
			h.put(sec, "cap", capCfg(t))
		}},
		{"bursty, a second later back", func(t *testing.T, h *harness) {
			h.put(sec, "cap", bursty(t, 5))
			h.put(2*sec, "cap", capCfg(t))
		}},
		{"delete and re-create", func(t *testing.T, h *harness) {
			if d := h.del(sec, "cap"); !d.Existed || d.Detail != "" {
				t.Fatalf("delete: %+v", d)
			}
			h.put(sec, "cap", capCfg(t))
		}},
		{"delete, re-create strict, then a cap with a shorter TTL", func(t *testing.T, h *harness) {
			h.del(sec, "cap")
			h.put(sec, "cap", strict(t, 1, 0))
			h.put(sec, "cap", concurrency(t, 1, 5*time.Second))
		}},
		{"shadow and enforced again", func(t *testing.T, h *harness) {
			h.putShadow(sec, "cap", capCfg(t))
			h.put(sec, "cap", capCfg(t))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.put(0, "cap", capCfg(t))
			a := h.reserve1(0, tracked(0, Part{"cap", 1}))
			if a.Status != Granted || !a.Holds {
				t.Fatalf("first reserve: %+v, want granted, holding", a)
			}
			c.between(t, h)
			if b := h.reserve1(3*sec, tracked(0, Part{"cap", 1})); b.Status != Refused || b.Blocking != "cap" {
				t.Fatalf("second reserve while the first is held: %+v, want refused by cap", b)
			}
			if rel := h.releaseCmd(4*sec, Release{Reservation: a.ReservationID}); rel.Status != Settled || rel.Released != 1 {
				t.Fatalf("release of the first: %+v, want 1 released", rel)
			}
			if b := h.reserve1(4*sec, tracked(0, Part{"cap", 1})); b.Status != Granted {
				t.Fatalf("second reserve after the release: %+v, want granted", b)
			}
		})
	}
	t.Run("released while not a cap", func(t *testing.T) {
		h := newHarness(t)
		h.put(0, "cap", capCfg(t))
		a := h.reserve1(0, tracked(0, Part{"cap", 1}))
		h.put(sec, "cap", strict(t, 1, 0))
		if rel := h.releaseCmd(2*sec, Release{Reservation: a.ReservationID}); rel.Released != 1 {
			t.Fatalf("release while the limit is strict: %+v, want 1 released", rel)
		}
		h.put(3*sec, "cap", capCfg(t))
		if b := h.reserve1(3*sec, tracked(0, Part{"cap", 1})); b.Status != Granted {
			t.Fatalf("reserve on the re-created cap: %+v, want granted (the released hold is not carried)", b)
		}
	})
	t.Run("settled while deleted", func(t *testing.T) {
		h := newHarness(t)
		h.put(0, "cap", concurrency(t, 2, time.Minute))
		a := h.reserve1(0, tracked(0, Part{"cap", 2}))
		h.del(sec, "cap")
		s := h.settleCmd(2*sec, Settle{Reservation: a.ReservationID, Actual: []Part{{"cap", 1}}})
		if s.Status != Settled || s.Parts[0].Refunded != 1 {
			t.Fatalf("settle while deleted: %+v, want 1 refunded", s)
		}
		h.put(3*sec, "cap", concurrency(t, 2, time.Minute))
		if b := h.reserve1(3*sec, tracked(0, Part{"cap", 2})); b.Status != Refused {
			t.Fatalf("2 on the re-created cap while 1 is held: %+v, want refused", b)
		}
		if b := h.reserve1(3*sec, tracked(0, Part{"cap", 1})); b.Status != Granted {
			t.Fatalf("1 on the re-created cap while 1 is held: %+v, want granted", b)
		}
	})
}
