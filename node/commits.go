package node

import (
	"sync/atomic"
	"time"
)

// reserveCommits counts a leader's reserve entries (the reserve batcher's
// entries applied and answered): how many, the reserves they carried and
// their time from submission to applied. Status serves the totals; their
// differences between two readings tell a run's short batches (fewer
// reserves an entry: the batcher's doing) from its slow commits (more
// time an entry at the same size: the disk's and the machine's).
type reserveCommits struct {
	batches, reserves, nanos atomic.Uint64
}

// add counts one committed entry of size reserves that took took.
func (c *reserveCommits) add(size int, took time.Duration) {
	c.batches.Add(1)
	c.reserves.Add(uint64(size))
	c.nanos.Add(uint64(max(took, 0)))
}

// read returns the totals: entries, reserves and nanoseconds. The three
// are read one after the other, so a reading taken while an entry is
// being counted may hold part of it; between readings seconds apart
// that is noise.
func (c *reserveCommits) read() (batches, reserves, nanos uint64) {
	return c.batches.Load(), c.reserves.Load(), c.nanos.Load()
}
