package workload

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestPermitDraws: mostly 1, the others within 2..max, the same sequence
// for the same seed and worker, another for another worker.
func TestPermitDraws(t *testing.T) {
	draw := func(seed uint64, id int, max int64) []int64 {
		d := newPermitDraws(seed, id, max)
		out := make([]int64, 400)
		for i := range out {
			out[i] = d.next()
		}
		return out
	}
	a := draw(3, 1, 5)
	if !slices.Equal(a, draw(3, 1, 5)) || slices.Equal(a, draw(3, 2, 5)) {
		t.Fatal("draws are not a function of seed and worker")
	}
	ones, seen := 0, map[int64]bool{}
	for _, n := range a {
		if n < 1 || n > 5 {
			t.Fatalf("drew %d, want 1..5", n)
		}
		if n == 1 {
			ones++
		}
		seen[n] = true
	}
	if ones < 250 || ones > 350 || len(seen) != 5 {
		t.Fatalf("%d ones of 400, counts seen %v: want about 300 and every count", ones, seen)
	}
	for _, n := range draw(3, 1, 1) {
		if n != 1 {
			t.Fatalf("max 1 drew %d", n)
		}
	}
}

func TestWorkerPoolPause(t *testing.T) {
	wp := NewPool(5)
	half := wp.PickHalf(3)
	if len(half) != 3 || !slices.IsSorted(half) || !reflect.DeepEqual(half, wp.PickHalf(3)) {
		t.Fatalf("pickHalf: %v", half)
	}
	wp.Pause([]int{1})
	done := make(chan struct{})
	go func() { wp.PausePoint(t.Context(), 1); close(done) }()
	wp.PausePoint(t.Context(), 2) // not paused: returns at once
	select {
	case <-done:
		t.Fatal("paused worker went on")
	default:
	}
	wp.ResumeAll()
	<-done
}

// TestFleetLayout: sidecars are named and grouped like the workers, each
// with its own loopback addresses and log.
func TestFleetLayout(t *testing.T) {
	f, err := NewFleet("permitd", Config{Workload: Leased, Workers: 6, Groups: 3, OutDir: t.TempDir()}, "jl-leased", []string{"127.0.0.1:1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	names, groups := f.Members()
	var got []string
	for i := range names {
		got = append(got, names[i]+"@"+groups[i])
	}
	if want := []string{"g1-w0@g1", "g2-w1@g2", "g3-w2@g3", "g1-w3@g1", "g2-w4@g2", "g3-w5@g3"}; !slices.Equal(got, want) {
		t.Fatalf("layout %v, want %v", got, want)
	}
	seen := map[string]bool{}
	for _, s := range f.sidecars {
		for _, a := range []string{s.HTTPAddr, s.GossipAddr} {
			if seen[a] {
				t.Fatalf("address %s given twice", a)
			}
			seen[a] = true
		}
	}
	f.Isolate(t.Context(), "g2", "drop") // nothing runs: only the wish is recorded
	if f.isolatedMode("g2") != "drop" || f.isolatedMode("g1") != "" {
		t.Fatalf("isolated %v", f.isolated)
	}
	f.Isolate(t.Context(), "g2", "")
	if f.isolatedMode("g2") != "" {
		t.Fatalf("isolated %v after lifting", f.isolated)
	}
}

// TestMultiPermitTurn: one worker holds the turn at a time; the others
// wait until it is released or its bound passes.
func TestMultiPermitTurn(t *testing.T) {
	tu := newTurn()
	release, over := tu.take(1, time.Minute)
	if release == nil {
		t.Fatal("the free turn was not given")
	}
	if r, _ := tu.take(2, time.Minute); r != nil {
		t.Fatal("a second worker took a held turn")
	}
	tu.wait(t.Context(), 1) // the owner never waits for itself
	waited := make(chan struct{})
	go func() { tu.wait(t.Context(), 2); close(waited) }()
	select {
	case <-waited:
		t.Fatal("worker 2 went on during worker 1's turn")
	default:
	}
	release()
	<-waited
	if !ended(over) {
		t.Fatal("the released turn is not over")
	}
	release() // idempotent
	if r, _ := tu.take(2, time.Minute); r != nil {
		t.Fatal("a turn was given during the cooldown")
	}
	tu.mu.Lock()
	tu.ended = time.Now().Add(-time.Minute) // cooled down
	tu.mu.Unlock()
	r2, over2 := tu.take(2, 10*time.Millisecond)
	if r2 == nil {
		t.Fatal("the released turn was not given again after its cooldown")
	}
	tu.wait(t.Context(), 3) // returns once the bound passed
	if !ended(over2) {
		t.Fatal("the turn outlived its bound")
	}
}

// TestFitDelay: a refused reserve of n permits fits once the wait to the
// next free slot is at most (max_reserved − n + 1) intervals.
func TestFitDelay(t *testing.T) {
	I := 200 * time.Millisecond
	if got := fitDelay(900*time.Millisecond, I, 4, 3); got != 900*time.Millisecond-2*I+2*time.Millisecond {
		t.Fatalf("fitDelay = %v", got)
	}
	if got := fitDelay(time.Nanosecond, I, 4, 5); got != 2*time.Millisecond+time.Nanosecond {
		t.Fatalf("fitDelay, n = max_reserved + 1 (an empty queue) = %v", got)
	}
}
