package netns

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// nftTable is the nftables table (family inet) the runner owns inside
// every node's network namespace. Nothing else is ever put in a node's
// namespace, and the table dies with the namespace.
const nftTable = "jepsen"

// kernelFaults is one node's network faults in the namespace mode, as
// packet filters in the node's own namespace. Only traffic between node
// addresses is ever matched: clients (the root-side veth's address) are
// never cut.
type kernelFaults struct {
	// Block: every packet to or from these node addresses is dropped.
	Block []netip.Addr
	// BlockDial: the node cannot open connections to (nor keep the ones
	// it opened with) these node addresses; they can still dial it (its
	// answers on their connections pass). Packets the node sends in the
	// original direction of a connection are dropped.
	BlockDial []netip.Addr
	// Peers are the other nodes; LossPermille of the packets the node
	// sends to them are dropped at random (0 to 1000).
	Peers        []netip.Addr
	LossPermille int
}

// nftRuleset renders kf as an nft script that replaces the runner's table
// atomically (nft -f applies a whole script as one transaction: the add
// makes the delete succeed on a fresh namespace). Addresses are sorted, so
// equal faults give equal text. It fails on an address that is not IPv4
// or a loss outside 0..1000 per mille.
func nftRuleset(kf kernelFaults) (string, error) {
	if kf.LossPermille < 0 || kf.LossPermille > 1000 {
		return "", fmt.Errorf("netns: packet loss %d per mille; allowed: 0 to 1000", kf.LossPermille)
	}
	set := func(addrs []netip.Addr) (string, error) {
		var s []string
		for _, a := range sortedAddrs(addrs) {
			if !a.Is4() {
				return "", fmt.Errorf("netns: address %v in a packet filter; allowed: IPv4 node addresses", a)
			}
			s = append(s, a.String())
		}
		return "{ " + strings.Join(s, ", ") + " }", nil
	}
	var in, out []string
	if len(kf.Block) > 0 {
		s, err := set(kf.Block)
		if err != nil {
			return "", err
		}
		in = append(in, "ip saddr "+s+" drop")
		out = append(out, "ip daddr "+s+" drop")
	}
	if len(kf.BlockDial) > 0 {
		s, err := set(kf.BlockDial)
		if err != nil {
			return "", err
		}
		out = append(out, "ip daddr "+s+" ct direction original drop")
	}
	if kf.LossPermille > 0 && len(kf.Peers) > 0 {
		s, err := set(kf.Peers)
		if err != nil {
			return "", err
		}
		out = append(out, fmt.Sprintf("ip daddr %s numgen random mod 1000 < %d drop", s, kf.LossPermille))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s\ndelete table inet %s\ntable inet %s {\n", nftTable, nftTable, nftTable)
	chain := func(name string, rules []string) {
		fmt.Fprintf(&b, "\tchain %s {\n\t\ttype filter hook %s priority 0; policy accept;\n", name, name)
		for _, r := range rules {
			fmt.Fprintf(&b, "\t\t%s\n", r)
		}
		b.WriteString("\t}\n")
	}
	chain("input", in)
	chain("output", out)
	b.WriteString("}\n")
	return b.String(), nil
}

// sortedAddrs returns addrs sorted, without repeats.
func sortedAddrs(addrs []netip.Addr) []netip.Addr {
	out := slices.Clone(addrs)
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out)
}

// kernelFaultsOf translates a node's faults (raft HOST:PORT block lists
// and a loss probability, as the fallback mode pushes them) into
// packet filters: the hosts are node addresses, peers the node's peers.
func kernelFaultsOf(fs Faults, peers []netip.Addr) (kernelFaults, error) {
	kf := kernelFaults{Peers: peers}
	hosts := func(addrs []string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, a := range addrs {
			host, _, err := net.SplitHostPort(a)
			if err != nil {
				return nil, fmt.Errorf("netns: block list entry %q: %w", a, err)
			}
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return nil, fmt.Errorf("netns: block list entry %q: %w", a, err)
			}
			out = append(out, ip)
		}
		return out, nil
	}
	var err error
	if kf.Block, err = hosts(fs.Block); err != nil {
		return kf, err
	}
	if kf.BlockDial, err = hosts(fs.BlockDial); err != nil {
		return kf, err
	}
	if !(fs.Loss >= 0 && fs.Loss <= 1) {
		return kf, fmt.Errorf("netns: loss %v; allowed: 0 to 1", fs.Loss)
	}
	kf.LossPermille = int(fs.Loss*1000 + 0.5)
	return kf, nil
}
