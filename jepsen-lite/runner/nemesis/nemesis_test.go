package nemesis

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
)

// testNodes returns n nodes with distinct addresses (no processes).
func testNodes(n int) []*cluster.Node {
	var out []*cluster.Node
	for i := range n {
		id := string(rune('1' + i))
		out = append(out, &cluster.Node{ID: "n" + id, Index: i, RaftAddr: "127.0.0.1" + id + ":7000"})
	}
	return out
}

func TestPartitionShapes(t *testing.T) {
	nodes := testNodes(5)
	// Bridge: two pairs that cannot talk, one node talking to all.
	af := &activeFault{blocks: map[string][]string{}}
	p := permuted(nodes, 42)
	blockGroups(af, p[:2], p[3:])
	if len(af.blocks[p[2].ID]) != 0 {
		t.Fatalf("bridge node %s blocks %v", p[2].ID, af.blocks[p[2].ID])
	}
	for _, n := range append(slices.Clone(p[:2]), p[3:]...) {
		if len(af.blocks[n.ID]) != 2 {
			t.Fatalf("%s blocks %v, want the other pair", n.ID, af.blocks[n.ID])
		}
	}
	if !reflect.DeepEqual(permuted(nodes, 42), p) {
		t.Fatal("permuted is not deterministic in its pick")
	}
	// Isolating one node: it blocks all 4 others, each of them blocks it.
	af = &activeFault{blocks: map[string][]string{}}
	blockGroups(af, nodes[:1], nodes[1:])
	if len(af.blocks["n1"]) != 4 || !reflect.DeepEqual(af.blocks["n2"], []string{nodes[0].RaftAddr}) {
		t.Fatalf("isolate: %v", af.blocks)
	}
}

func TestDesiredComposesFaults(t *testing.T) {
	nodes := testNodes(3)
	nm := &Nemesis{cl: &cluster.Cluster{Nodes: nodes}, active: map[int]*activeFault{}}
	nm.active[0] = &activeFault{blocks: map[string][]string{"n1": {nodes[1].RaftAddr}}, blockDial: map[string][]string{}, loss: map[string]cluster.FaultState{}}
	nm.active[1] = &activeFault{blocks: map[string][]string{"n1": {nodes[2].RaftAddr, nodes[1].RaftAddr}}, blockDial: map[string][]string{"n2": {nodes[0].RaftAddr}},
		loss: map[string]cluster.FaultState{"n1": {Loss: 0.05, Delay: "5ms", Jitter: "2ms"}}}
	got := nm.desired()
	want := cluster.FaultState{Block: []string{nodes[1].RaftAddr, nodes[2].RaftAddr}, BlockDial: []string{}, Loss: 0.05, Delay: "5ms", Jitter: "2ms"}
	if !got["n1"].Equal(want) {
		t.Fatalf("n1: %+v, want %+v", got["n1"], want)
	}
	if !got["n2"].Equal(cluster.FaultState{Block: []string{}, BlockDial: []string{nodes[0].RaftAddr}, Delay: "0s", Jitter: "0s"}) {
		t.Fatalf("n2: %+v", got["n2"])
	}
	if !got["n3"].Equal(cluster.FaultState{Block: []string{}, BlockDial: []string{}, Delay: "0s", Jitter: "0s"}) {
		t.Fatalf("n3: %+v", got["n3"])
	}
}

// fakeSidecars records what the worker faults do to the sidecars.
type fakeSidecars struct {
	names, groups []string
	isolated      map[string]string
	paused        map[int]bool
	killed        []int
	started       []int
	relays        []string
	relayEvents   []string // "kill r1", "stop r2", "start r1", "cut drop"
}

func (f *fakeSidecars) Members() ([]string, []string) { return f.names, f.groups }
func (f *fakeSidecars) Isolate(_ context.Context, group, mode string) {
	if mode == "" {
		delete(f.isolated, group)
	} else {
		f.isolated[group] = mode
	}
}
func (f *fakeSidecars) Pause(i int) error  { f.paused[i] = true; return nil }
func (f *fakeSidecars) Resume(i int) error { delete(f.paused, i); return nil }
func (f *fakeSidecars) Kill(_ context.Context, i int) error {
	f.killed = append(f.killed, i)
	return nil
}
func (f *fakeSidecars) Start(i int) error       { f.started = append(f.started, i); return nil }
func (f *fakeSidecars) HealAll(context.Context) {}
func (f *fakeSidecars) Relays() []string        { return f.relays }
func (f *fakeSidecars) KillRelay(_ context.Context, i int) error {
	f.relayEvents = append(f.relayEvents, "kill "+f.relays[i])
	return nil
}
func (f *fakeSidecars) StopRelay(_ context.Context, i int) {
	f.relayEvents = append(f.relayEvents, "stop "+f.relays[i])
}
func (f *fakeSidecars) StartRelay(_ context.Context, i int) error {
	f.relayEvents = append(f.relayEvents, "start "+f.relays[i])
	return nil
}
func (f *fakeSidecars) CutRelays(mode string) { f.relayEvents = append(f.relayEvents, "cut "+mode) }

// TestRelayFaults: a relay kill picks its relay from the event's Pick and
// starts it again at the end; a relay partition cuts every relay off
// (drop and blackhole alternately by the pick) until it is healed.
func TestRelayFaults(t *testing.T) {
	f := &fakeSidecars{relays: []string{"r1", "r2"}}
	nm := &Nemesis{fleet: f}
	for _, tt := range []struct {
		ev      Event
		targets []string
		events  []string
	}{
		{Event{Fault: FaultRelay, Variant: "kill", Pick: 3}, []string{"r2"}, []string{"kill r2", "start r2"}},
		{Event{Fault: FaultRelay, Variant: "partition", Pick: 4}, []string{"r1", "r2"}, []string{"cut drop", "cut "}},
		{Event{Fault: FaultRelay, Variant: "partition", Pick: 5}, []string{"r1", "r2"}, []string{"cut blackhole", "cut "}},
	} {
		f.relayEvents = nil
		af := &activeFault{rec: &Record{}}
		targets := nm.beginRelayFault(t.Context(), 0, tt.ev, af)
		if af.undo == nil {
			t.Fatalf("%s: no heal", tt.ev.Name())
		}
		if errs := af.undo(t.Context()); len(errs) > 0 {
			t.Fatalf("%s: heal: %v", tt.ev.Name(), errs)
		}
		if !slices.Equal(targets, tt.targets) || !slices.Equal(f.relayEvents, tt.events) {
			t.Fatalf("%s pick %d: targets %v, events %q; want %v, %q", tt.ev.Name(), tt.ev.Pick, targets, f.relayEvents, tt.targets, tt.events)
		}
	}
}

// TestWorkerFaultTargets: worker faults pick their targets from the
// event's Pick; a group partition sets that group's register fault
// (alternating drop and blackhole) until it is healed; a killed sidecar
// is started again at the end.
func TestWorkerFaultTargets(t *testing.T) {
	f := &fakeSidecars{isolated: map[string]string{}, paused: map[int]bool{},
		names: []string{"g1-w0", "g2-w1", "g3-w2", "g1-w3", "g2-w4", "g3-w5"}, groups: []string{"g1", "g2", "g3", "g1", "g2", "g3"}}
	for _, tt := range []struct {
		pick    uint64
		group   string
		mode    string
		targets []string
	}{
		{2, "g3", RegisterDrop, []string{"g3-w2", "g3-w5"}},
		{3, "g1", RegisterBlackhole, []string{"g1-w0", "g1-w3"}},
	} {
		rec := &Record{}
		targets, undo := workerFault(t.Context(), f, 3, Event{Fault: FaultWorker, Variant: "isolate-group", Pick: tt.pick}, rec)
		if !slices.Equal(targets, tt.targets) || f.isolated[tt.group] != tt.mode {
			t.Fatalf("pick %d: targets %v, isolated %v; want %v, %s=%s", tt.pick, targets, f.isolated, tt.targets, tt.group, tt.mode)
		}
		if errs := undo(t.Context()); len(errs) > 0 || len(f.isolated) != 0 {
			t.Fatalf("undo: %v, isolated %v", errs, f.isolated)
		}
	}
	targets, undo := workerFault(t.Context(), f, 3, Event{Fault: FaultWorker, Variant: "pause", Pick: 5}, &Record{})
	if len(targets) != 3 || len(f.paused) != 3 {
		t.Fatalf("pause: targets %v, paused %v; want half of 6", targets, f.paused)
	}
	undo(t.Context())
	if len(f.paused) != 0 {
		t.Fatalf("resume: still paused %v", f.paused)
	}
	targets, undo = workerFault(t.Context(), f, 3, Event{Fault: FaultWorker, Variant: "kill", Pick: 7}, &Record{})
	if !slices.Equal(targets, []string{"g2-w1"}) || !slices.Equal(f.killed, []int{1}) {
		t.Fatalf("kill: targets %v, killed %v", targets, f.killed)
	}
	undo(t.Context())
	if !slices.Equal(f.started, []int{1}) {
		t.Fatalf("restart: started %v", f.started)
	}
}

// TestGenerateIsSeeded: the same configuration gives the same schedule,
// within the fault window.
func TestGenerateIsSeeded(t *testing.T) {
	cfg := Config{Seed: 4, Nodes: 3, Warmup: 3 * time.Second, Duration: time.Minute, Tail: 15 * time.Second,
		Specs: []Spec{{Kind: FaultKill}, {Kind: FaultClock}}}
	a := Generate(cfg)
	if len(a) == 0 || !reflect.DeepEqual(a, Generate(cfg)) {
		t.Fatalf("schedules differ or are empty: %v", a)
	}
	for _, ev := range a {
		if err := ev.Validate(cfg.Duration - cfg.Tail); err != nil {
			t.Fatal(err)
		}
	}
}
