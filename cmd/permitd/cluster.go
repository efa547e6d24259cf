package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/permitd/permitd/transport/client"
)

func init() {
	register("cluster", "manage membership and leadership: show, join, remove, transfer", runCluster)
}

// clusterSubcommands are the subcommands of "permitd cluster".
var clusterSubcommands = []subcommand{
	{"show", "print the servers: IDs, raft and HTTP addresses, voters, the leader", runClusterShow},
	{"join", "add a server to the cluster (a voter once it has caught up)", runClusterJoin},
	{"remove", "remove a server from the cluster", runClusterRemove},
	{"transfer", "hand the leadership to another voter", runClusterTransfer},
}

func runCluster(args []string, stdout, stderr io.Writer) int {
	return commandGroup{"cluster", "Shows and changes the cluster's membership and leadership (through the leader).\n", clusterSubcommands}.run(args, stdout, stderr)
}

func runClusterShow(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("cluster show", "cluster show [--json] [--servers HTTPADDR,...]", `
Prints the raft configuration as the first answering node sees it: a line
naming that node, its term and the leader, then one row per server:

  ID      the server's ID
  RAFT    its raft address
  HTTP    the address of its HTTP API, as it last told the answering node
          over the cluster's network ("-" if unknown: it has not answered
          since that node started); permitd status asks every server there
  VOTER   voter, or non-voter (joined, not promoted yet)
  LEADER  * for the leader

--json prints the server's answer (GET /v1/cluster) as JSON instead.

`+exitStatusText, stdout, stderr)
	var cf clientFlags
	var jsonOut bool
	c.Bool(&jsonOut, "json", false, "print JSON instead of a table")
	cf.define(c)
	if ok, code := c.parse(args); !ok {
		return code
	}
	show := func(ctx context.Context, cl *client.Client) (client.Cluster, error) { return cl.Cluster(ctx) }
	return runCall(c, &cf, show, func(cl client.Cluster) int {
		if jsonOut {
			printJSON(stdout, cl)
		} else {
			printClusterTable(stdout, cl)
		}
		return exitOK
	})
}

// printClusterTable prints who answered (its term and leader), then one
// row per server.
func printClusterTable(w io.Writer, cl client.Cluster) {
	leader := cl.LeaderID
	if leader == "" {
		leader = "none known"
	}
	fmt.Fprintf(w, "as %s sees it, term %d, leader %s:\n", cl.ID, cl.Term, leader)
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRAFT\tHTTP\tVOTER\tLEADER")
	for _, s := range cl.Servers {
		httpAddr, voter, mark := s.HTTPAddr, "voter", ""
		if httpAddr == "" {
			httpAddr = "-"
		}
		if !s.Voter {
			voter = "non-voter"
		}
		if s.Leader {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.ID, s.RaftAddr, httpAddr, voter, mark)
	}
	tw.Flush()
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		fmt.Fprint(w, strings.TrimRight(line, " \n")+strings.Repeat("\n", strings.Count(line, "\n")))
	}
}

func runClusterJoin(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("cluster join", "cluster join ID RAFTADDR [--servers HTTPADDR,...]", `
Adds server ID, whose raft address is RAFTADDR (HOST:PORT), to the cluster
as a non-voter: it receives the log but does not vote until the leader,
probing it over the cluster's network (mutual TLS when it is on), has seen
it caught up for a while, and makes it a voter. A server that never
catches up (down, a wrong address, a certificate the cluster refuses)
never votes; `+"`permitd status`"+` reports it until it is removed. A new agent
started with --join does this by itself. A join is refused while
--max-pending-joins servers await promotion.

`+exitStatusText, stdout, stderr)
	c.args("ID", "RAFTADDR")
	var cf clientFlags
	cf.define(c)
	if ok, code := c.parse(args); !ok {
		return code
	}
	id, addr := c.arg(0), c.arg(1)
	if err := checkName("server ID", id); err != nil {
		return c.usageError(err.Error())
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return c.usageErrorf("RAFTADDR %q: %v; allowed: HOST:PORT", addr, err)
	}
	join := func(ctx context.Context, cl *client.Client) (client.Joined, error) { return cl.Join(ctx, id, addr) }
	return runCall(c, &cf, join, func(j client.Joined) int {
		if j.Voter {
			fmt.Fprintf(stdout, "%s (raft %s) is a member already, and a voter\n", id, addr)
		} else {
			fmt.Fprintf(stdout, "joined %s (raft %s) as a non-voter: the leader makes it a voter once it has caught up (`permitd status` shows its progress)\n", id, addr)
		}
		return exitOK
	})
}

func runClusterRemove(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("cluster remove", "cluster remove ID [--servers HTTPADDR,...]", `
Removes server ID from the raft configuration and prints which server was
removed and the voters that remain. Stop the removed node afterwards (it
no longer takes part in the cluster); removing a running node that still
believes it is a member makes it campaign on its own.

`+exitStatusText, stdout, stderr)
	c.args("ID")
	var cf clientFlags
	cf.define(c)
	if ok, code := c.parse(args); !ok {
		return code
	}
	id := c.arg(0)
	if err := checkName("server ID", id); err != nil {
		return c.usageError(err.Error())
	}
	cl, ctx, cancel, err := cf.client()
	if err != nil {
		return c.usageError(err.Error())
	}
	defer cancel()
	before, err := cl.Cluster(ctx)
	if err != nil {
		return c.fail(exitCodeOf(err), err)
	}
	raftAddr, found := "", false
	var remaining []string
	for _, s := range before.Servers {
		if s.ID == id {
			raftAddr, found = s.RaftAddr, true
		} else if s.Voter {
			remaining = append(remaining, s.ID)
		}
	}
	if !found {
		return c.fail(exitFailure, fmt.Errorf("server %q is not a member; members: %s", id, memberIDs(before.Servers)))
	}
	if err := cl.RemoveServer(ctx, id); err != nil {
		return c.fail(exitCodeOf(err), err)
	}
	fmt.Fprintf(stdout, "removed %s (raft %s) from the cluster; voters now: %s\n", id, raftAddr, strings.Join(remaining, ", "))
	return exitOK
}

// memberIDs lists the servers' IDs.
func memberIDs(servers []client.Server) string {
	ids := make([]string, len(servers))
	for i, s := range servers {
		ids[i] = s.ID
	}
	return strings.Join(ids, ", ")
}

func runClusterTransfer(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("cluster transfer", "cluster transfer [--to ID] [--servers HTTPADDR,...]", `
Makes the leader hand its leadership over to voter --to (any other voter if
--to is not given), waits until a new leader is known, and prints who led
before and who leads now. Use it before stopping the leader for
maintenance (a leader stopped with SIGTERM also hands over by itself).

`+exitStatusText, stdout, stderr)
	var cf clientFlags
	var to string
	c.String(&to, "to", "ID", "", "the voter to hand leadership to (default: any other voter)").Check(func(s string) error {
		return checkName("server ID", s)
	})
	cf.define(c)
	if ok, code := c.parse(args); !ok {
		return code
	}
	cl, ctx, cancel, err := cf.client()
	if err != nil {
		return c.usageError(err.Error())
	}
	defer cancel()
	before, err := cl.Cluster(ctx)
	if err != nil {
		return c.fail(exitCodeOf(err), err)
	}
	if to != "" && to == before.LeaderID {
		return c.fail(exitUsage, fmt.Errorf("%s already leads (term %d)", to, before.Term))
	}
	if err := cl.TransferLeadership(ctx, to); err != nil {
		return c.fail(exitCodeOf(err), err)
	}
	// Wait (bounded by --timeout) until some node names the new leader.
	for {
		after, err := cl.Cluster(ctx)
		if err == nil && after.LeaderID != "" && after.LeaderID != before.LeaderID {
			fmt.Fprintf(stdout, "leadership transferred from %s to %s (term %d)\n", before.LeaderID, after.LeaderID, after.Term)
			return exitOK
		}
		select {
		case <-ctx.Done():
			return c.fail(exitFailure, fmt.Errorf("the transfer was accepted but no new leader was seen within --timeout %v", cf.timeout))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
