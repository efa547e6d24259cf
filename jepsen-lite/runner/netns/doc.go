// Package netns is the namespace mode's network: one network namespace
// per permitd agent, joined by veth pairs to a bridge in a namespace of
// its own, and the packet filters (nftables) that partition the nodes and
// drop their packets.
//
// # Safety
//
// A run claims a /24 of 10.213.0.0/16 and, before it creates any
// namespace, blackholes it in the root namespace (ip route ... proto 213,
// metric = the runner's pid); the nodes live in its lower /25 and the
// runner reaches them through one more veth pair, pdj<pid>-h (.126) in
// the root namespace, whose connected /25 is more specific than the
// blackhole (checked at setup: blackholed while it is down, routed through
// it once up). Nothing is ever routed out of the machine. Every name the
// package creates starts with pdj<pid>- (namespaces pdj<pid>-n<i> and
// pdj<pid>-br, links), so that Cleanup removes exactly the run's own, and
// every run first sweeps the leftovers of runners that are gone (a runner
// killed with -9).
//
// # Faults
//
// Apply replaces one node's nftables table (inet jepsen, in the node's
// own namespace, loaded atomically with nft -f): packets to and from the
// blocked node addresses are dropped, one-way blocks drop the packets a
// node sends in the original direction of a connection, and loss drops a
// share of its packets to the other nodes at random. Only traffic between
// node addresses is ever matched: the runner's own clients are never cut.
// Delay and jitter are not kernel faults here (netem is not used); the
// caller keeps them in permitd's fault layer.
//
// Detect tells whether the mode can run (root, ip(8), nft(8), and a real
// probe); Setup builds the network, Command wraps an agent's command line
// in ip netns exec, NodeAddrs gives each node's addresses, and Cleanup
// (idempotent) kills what runs in the namespaces and removes everything,
// the blackhole last.
package netns
