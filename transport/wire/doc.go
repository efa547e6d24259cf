// Package wire is permitd's binary, pipelined request protocol: the
// framing, the operation and answer codes, the little varint codec of the
// payloads, a queued frame writer, the client side of a pipelined
// connection, and the protocol's reserve vocabulary (Reserve,
// ReserveResult).
//
// It imports nothing of permitd's: both sides share it, the Go client
// without the server's packages (no raft, no bbolt) and the nodes, which
// convert its types to and from the register's.
//
// Two kinds of peers speak it:
//
//   - a follower forwarding client requests to the leader, on the raft port
//     (the connection's first byte is 'F'; see package node), and
//   - a client on a node's HTTP port, which opens the connection with the
//     byte ClientPreface (0x00, which no HTTP request can start with) and
//     then sends reserves only (see transport and transport/client).
//
// A frame is [u32 length][u64 call id][u8 op or code][payload], big endian;
// length counts the id, the op and the payload and is at most MaxFrame.
// Many calls are in flight on one connection at once and their answers may
// come back in any order: the call id pairs them. Writers queue frames and
// flush when their queue is empty (one made with NewYieldingWriter, as a
// node's serving side is, after yielding once to the goroutines ready to
// run while its busy reports more frames coming, so that they join the
// flush), so that a burst of frames shares one write system call while a
// lone frame leaves at once; this is what makes one connection carry tens
// of thousands of decisions per second. A frame known to be alone
// (Writer.SendNow: a node's answer when no other call of its connection
// is under way, as a worker's renewal) is written by its sender when the
// writer is idle, without waking the writer's goroutine.
//
// Every value is bounded when read, and a short or malformed frame is an
// error, never a panic: frames cross the network.
//
// The durations frames carry are int64 nanoseconds, and any int64 is a
// valid max wait. AddNanos, MulNanos and FloatNanos (nanos.go) are the
// arithmetic both sides do with them outside the register's pure math:
// they saturate at the end of the int64 range instead of wrapping around
// into the past.
package wire
