package main

import (
	"slices"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// holders.go: the register clients of the lease holders, in both modes
// (the sweep's workers and -register-load's holders): which nodes a
// holder talks to first (-via), over which protocol (-protocol), and how
// many holders share a client (-clients).

// serverOrder is the server list of holder i: the leader first (-via
// leader), the followers first (followers: they forward each command to
// the leader over the nodes' binary, pipelined connection), node i mod 3
// first (nodes, as workers given the same list spread themselves:
// permitd worker rotates it by its name), or as nodes but moving a holder
// whose first node is the leader to the next (spread, as permitd worker
// does at start).
func serverOrder(reg *register, via string, i int) []string {
	servers := []string{reg.HTTP[reg.Leader]}
	for j, h := range reg.HTTP {
		if j != reg.Leader {
			servers = append(servers, h)
		}
	}
	switch via {
	case "followers":
		return append(servers[1:], servers[0])
	case "nodes", "spread":
		k := i % len(servers)
		if k == 0 && via == "spread" { // servers[0] is the leader
			k = 1 + (i/len(servers))%(len(servers)-1)
		}
		return slices.Concat(servers[k:], servers[:k])
	}
	return servers
}

// holderClients makes the clients of n holders: o.clients of them shared
// round robin, or one per holder (o.clients 0), as a real fleet has one
// per worker process (the leader then reads every renewal off its own
// connection). Client k's servers are serverOrder(k).
//
// With relays (-relays), client k talks to relay k mod N first.
func holderClients(reg *register, o options, n int, relays *relayProcs) ([]*client.Client, error) {
	opts := holderOptions(o.protocol)
	k := o.clients
	if k <= 0 {
		k = n
	}
	clients := make([]*client.Client, 0, min(k, n))
	for i := range min(k, n) {
		servers, copts := serverOrder(reg, o.via, i), opts
		if r := relays.first(i); r != "" {
			servers, copts = append([]string{r}, servers...), append(slices.Clip(opts), relayReturn)
		}
		c, err := client.New(servers, copts...)
		if err != nil {
			closeClients(clients)
			return nil, err
		}
		clients = append(clients, c)
	}
	return clients, nil
}

// relayReturn is the option of a holder with a relay: back to the relay
// 5 s after it left it, as permitd worker --relay.
var relayReturn = client.WithReturnToFirst(5 * time.Second)

// holderOptions are the client options of a holder speaking protocol
// (binary: lease commands over the binary protocol, as permitd worker).
func holderOptions(protocol string) []client.Option {
	if protocol == "binary" {
		return []client.Option{client.WithBinaryLeases()}
	}
	return nil
}

// closeClients closes every client.
func closeClients(cs []*client.Client) {
	for _, c := range cs {
		c.Close()
	}
}
