package node

import "github.com/permitd/permitd/fsm"

// overload.go: a node bounds the reserves it holds. Queueing more than it
// can decide in time only lengthens every wait until clients time out,
// and a leader swamped with goroutines, buffers and answers to write can
// miss its raft deadlines and lose leadership, which stops every decision
// for an election. Beyond MaxPendingReserves a reserve fails at once with
// ErrOverloaded (HTTP 503 with Retry-After): it changes nothing, costs the
// node a decode and an answer (a binary one less: TryHoldReserve), and a
// client retries later or elsewhere.

// PendingBatches is the default Config.MaxPendingReserves in batches:
// MaxInflight (2) batches committing, one forming and two more queued, so
// that a full batch is ready when a commit slot frees. At the default
// MaxBatch (1024) that is DefaultMaxPendingReserves. Fewer starved the
// pipeline: 2048 capped the leader's goodput at 22 500 decisions a
// second against about 57 000; and with only one batch queued (4 in
// all), under overload the reserves that replace an answered batch
// reached the batcher too late for the next one (each is admitted when
// its frame is read, then handed to a goroutine), so batches left short:
// at --max-batch 16 and 3x its capacity they carried 14.9 reserves on
// average against 15.8 with this bound, and the goodput was a median
// 91 % of the capacity over nine runs against 97 % over fifteen
// (cmd/internal/bench/README.md, "Overload"). More only lengthens every admitted
// reserve's wait (with --max-batch 16 at 3x its capacity, on an earlier
// and slower machine, 4096 admitted reserves waited 1.3-1.4 s at p99 for
// 68-70 % of the capacity as goodput and 64 waited 28-42 ms for about
// all of it; on the later one, 80 waited 7-11 ms). The default does not
// follow Config.MaxInflight: a node given more commit slots than 2
// should be given a bound of MaxInflight+3 batches.
const PendingBatches = 5

// DefaultMaxPendingReserves is the default Config.MaxPendingReserves at
// the default MaxBatch: PendingBatches full batches.
const DefaultMaxPendingReserves = PendingBatches * 1024

// Admission is what a connection's read loop decides about a call before
// it is served (Calls.Admit, ServeCalls).
type Admission uint8

const (
	// AdmitServe: serve the call; no slot was taken for it.
	AdmitServe Admission = iota
	// AdmitHeld: serve the reserve with the slot the read loop took for
	// it (TryHoldReserve); ServeCalls gives it back when the call returns.
	AdmitHeld
	// AdmitShed: refuse the reserve as overloaded from the read loop.
	AdmitShed
)

// TryHoldReserve takes one of the node's MaxPendingReserves slots for a
// reserve a connection's read loop admits (Calls.Admit answers AdmitHeld,
// and the call is then decided with ReserveHeld), and reports whether one
// was free. The read loop of the server's binary clients takes a
// reserve's slot there and then, so that the decision is exact: the
// frames of one read all see the count their predecessors left, and none
// is served only to be refused by Reserve behind a goroutine hand-off, a
// timer and a formatted message (when the decision was made from a count
// the calls under way had not yet raised, the call pool took a third of a
// leader's CPU at 3x its capacity, against a fifth in a closed loop at its
// bound). With no slot free, a reserve the read loop sheds (AdmitShed)
// costs the node the frame's read, a small decode and an answer built
// once (Node.overloadedMsg), queued with the refusals of the frames read
// with it and written with them in one system call. At 3x a leader's
// capacity refusals outnumber admitted reserves two to one, and every
// cycle they take is taken from deciding.
func (n *Node) TryHoldReserve() bool {
	_, ok := n.tryAdmit(1)
	return ok
}

// ReleaseReserve gives back a slot TryHoldReserve took for a reserve that
// was not handed to ServeCalls (AdmitHeld hands it over).
func (n *Node) ReleaseReserve() { n.pending.Add(-1) }

// tryAdmit takes k slots for reserves if the node has them, without
// counting a refusal; held is the count it found.
func (n *Node) tryAdmit(k int64) (held int64, ok bool) {
	// Compare and swap, not add then undo: the count never exceeds the
	// bound, even for an instant (Load reads it).
	for {
		held := n.pending.Load()
		if held+k > int64(n.cfg.MaxPendingReserves) {
			return held, false
		}
		if n.pending.CompareAndSwap(held, held+k) {
			return held, true
		}
	}
}

// overloadedMessage is the message of a reserve a read loop shed
// (AdmitShed).
func overloadedMessage(id string, most int) []byte {
	return []byte(Message(userErrorf(ErrOverloaded, "node %s holds its most reserves (--max-pending-reserves %d); retry shortly, or at another node", id, most)))
}

// admitReserves takes k slots for reserves, or fails with ErrOverloaded
// (taking none); release gives them back.
func (n *Node) admitReserves(k int64) (release func(), err error) {
	if held, ok := n.tryAdmit(k); !ok {
		n.shed.Add(uint64(k))
		return nil, userErrorf(ErrOverloaded, "node %s holds %d reserves, its most (--max-pending-reserves %d); retry shortly, or at another node",
			n.cfg.ID, held, n.cfg.MaxPendingReserves)
	}
	return func() { n.pending.Add(-k) }, nil
}

// admitForwarded takes slots for a forwarded entry that carries reserves
// (one per reserve), or none for any other command.
func (n *Node) admitForwarded(e fsm.Entry) (release func(), err error) {
	k := int64(len(e.Reserves))
	if k == 0 {
		return func() {}, nil
	}
	return n.admitReserves(k)
}

// Load returns the reserves this node holds now and the total it refused
// as overloaded.
func (n *Node) Load() (pending int64, shed uint64) { return n.pending.Load(), n.shed.Load() }
