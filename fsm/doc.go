// Package fsm is permitd's replicated state machine: the hashicorp/raft FSM
// that holds the named limits, each limit's pacer (package bucket), and the
// table of recently seen request IDs.
//
// # Commands
//
// Every log entry is a compact binary command (see encode.go for the byte
// layout), in the manner of consul's FSM: byte 0 is the CommandType, byte 1
// the EncodingVersion, then the leader's cluster time NowNanos, then the
// command:
//
//   - CmdPutLimit creates a limit or replaces its configuration. With the
//     same algorithm the pacer is reconfigured and keeps its debt (permits
//     already reserved stay reserved); with another algorithm it starts
//     afresh. The limit's Version becomes the raft index of the put.
//   - CmdDeleteLimit removes a limit and its state.
//   - CmdReserveBatch carries 1 to MaxBatchReserves reserves, decided in
//     order at the same cluster time. Applying a batch gives exactly the
//     results (and the state) of applying its reserves one per entry at that
//     time: batching is only a way to share one fsync.
//   - CmdNoop only advances the cluster time; a new leader writes one.
//
// The Append functions validate before encoding (reject before replicate):
// an entry they produce always decodes. Decode validates again, and every
// value has exactly one encoding (shortest varints, canonical configs, no
// trailing bytes), so an entry that decodes re-encodes to the same bytes.
//
// # Failures
//
// Apply distinguishes, like consul, two kinds of failure. An entry that does
// not decode, or is invalid, was never produced by this package: it is a bug
// or corruption, and skipping or half-applying it could make replicas
// diverge, so Apply panics with the index and the reason (the node stops
// loudly). Domain outcomes are values: a refused reserve, an unknown limit,
// more permits than the limit's configuration can ever grant
// (ReserveResult.Status Refused, UnknownLimit, Invalid), and a reconfigure
// the pacer cannot perform (PutResult.Detail).
//
// # Cluster time
//
// Time is an argument, never read from a clock. Each entry carries the
// leader's time; Apply clamps it to the timeline, now = max(lastNow,
// entry.NowNanos), and remembers it. The timeline starts at 0 and never goes
// backwards, so an entry stamped by a leader whose clock is behind is
// decided at the latest time already seen: a grant can be later than the
// leader meant, never earlier. LastNowNanos lets a new leader continue the
// timeline from the last applied entry. raft.Log.AppendedAt is never used.
//
// Results are relative to the entry's clamped time: WaitNanos, ExpiresInNanos
// and RetryAfterNanos are durations, never instants, so client clocks do not
// matter.
//
// # Deduplication
//
// A reserve with a non-empty RequestID is recorded with its outcome (in
// absolute cluster time). A later reserve with the same ID, in the same batch
// or a later entry, reserves nothing and gets that outcome with
// Duplicate=true, its times re-expressed relative to the later entry's time
// (the wait shrinks, an expired grant reports ExpiresInNanos = -1). Every
// outcome is recorded, refusals and unknown limits included: an ID names one
// decision, and a client that wants a new decision uses a new ID. IDs are
// global, not per limit.
//
// IDs are kept for DedupWindowNanos of cluster time and at most
// MaxDedupEntries at once, oldest forgotten first. The table is a queue in
// insertion order, which is log order, so eviction pops from its head,
// driven only by the cluster time of the entry being applied and by the
// table's size: all replicas forget the same IDs at the same entry.
//
// # Determinism
//
// Apply is a pure function of (state, entry): no clock, randomness, map
// iteration, goroutine or I/O. Replicated numbers are integers; names are
// kept sorted; the dedup table is ordered. Two FSMs fed the same log have
// byte-identical snapshots, which StateHash (SHA-256 of the snapshot) lets
// replicas compare.
//
// # Snapshots
//
// Snapshot encodes the whole state under the lock; Persist only writes the
// bytes. The format (see snapshot.go) is a magic and format version, the
// cluster time and applied index, the limits sorted by name (name, version,
// config, counters, pacer state), the dedup table in eviction order, and a
// CRC-32C of everything before it. Restore checks the checksum, every bound
// and invariant (sorted unique names, canonical configs that build pacers,
// pacer states they accept, IDs unique, in time order and inside the
// retention window),
// accepts only a snapshot that re-encodes to exactly its own bytes, and
// replaces the state only if all of that holds; otherwise it returns an
// error wrapping ErrDecode and changes nothing.
//
// # Concurrency
//
// raft calls Apply, Snapshot and Restore from one goroutine. The read
// methods (Limit, Limits, AppliedIndex, LastNowNanos, DedupEntries,
// StateHash) may be called from any goroutine; a sync.RWMutex orders them
// with Apply, which holds the write lock for one entry.
package fsm
