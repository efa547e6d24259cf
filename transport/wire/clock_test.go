package wire

import (
	"testing"
	"time"
)

// TestNanosAtIsTheClockReadingAtAnInstant: NanosAt of an instant read
// between two NowNanos readings lies between them, and an instant d later
// reads d more.
func TestNanosAtIsTheClockReadingAtAnInstant(t *testing.T) {
	c := NewMonotonicClock()
	for range 100 {
		before := c.NowNanos()
		at := time.Now()
		after := c.NowNanos()
		if got := c.NanosAt(at); got < before || got > after {
			t.Fatalf("NanosAt = %d, not within the readings around it [%d, %d]", got, before, after)
		}
		if d := c.NanosAt(at.Add(time.Second)) - c.NanosAt(at); d != int64(time.Second) {
			t.Fatalf("an instant 1s later reads %d ns more, want %d", d, int64(time.Second))
		}
	}
}
