package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/permitd/permitd/transport/client"
)

func init() {
	register("status", "print each node's state; exit 1 if the cluster is degraded", runStatus)
}

func runStatus(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("status", "status [--servers HTTPADDR,...] [--json] [--wait D]", `
Asks every node of --servers for its status, then every other member of
the cluster at the HTTP address the cluster view gives (permitd cluster
show), and prints one row per node:

  ID       the node's ID
  ADDRESS  the HTTP address it was asked at
  STATE    leader, follower or candidate, or unreachable
  LEADER   the leader it knows
  TERM     its raft term
  APPLIED/COMMIT  its applied index and its commit index
  READY    whether it serves requests (knows a leader, applied its log)
  CONTACT  how long ago it last heard from the leader (followers)

Servers that joined and do not vote yet follow, as the leader sees them:
their state (unreachable, not_following, behind, caught_up), how long the
leader has watched them and why they are not caught up. The leader makes
one a voter once it has been caught up for a while.

With --json it prints the nodes' answers as a JSON object keyed by server
URL instead ({"error":...} for a node that did not answer).

The cluster is healthy when every node asked answered, all are ready and
agree on a leader, every voter of the raft configuration is among them,
and every server that joined votes. Otherwise the reasons are printed on
stderr, on one line. It tells a voter whose HTTP address neither --servers
nor the cluster view gives (not asked) from one asked that did not
answer, and, when no node knows a leader and
fewer than a majority of the voters answer, how many a leader needs and
which voters to start.
--wait D asks again until the cluster is healthy or D has passed (for
scripts that start a cluster).

Exit status: 0 healthy; 1 degraded (a node unreachable or not ready, no
leader, a voter not checked, a joined server not promoted);
2 usage error.
`, stdout, stderr)
	var cf clientFlags
	var jsonOut bool
	var wait time.Duration
	c.Bool(&jsonOut, "json", false, "print JSON instead of a table")
	c.Duration(&wait, "wait", 0, durNonNegative, "ask again until the cluster is healthy or this much time has passed")
	cf.define(c)
	if ok, code := c.parse(args); !ok {
		return code
	}
	servers := dedupe(splitList(cf.servers))
	tlsOpts, err := cf.tls.options()
	if err != nil {
		return c.usageError(err.Error() + c.envNote())
	}
	cl, err := newClient(strings.Join(servers, ","), tlsOpts...)
	if err != nil {
		return c.usageError(err.Error() + c.envNote())
	}
	deadline := time.Now().Add(wait)
	var reports []nodeReport
	var problems []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
		reports = queryStatus(ctx, cl, servers, nil)
		reports = append(reports, queryFound(ctx, cl, reports, servers)...)
		cancel()
		problems = statusProblems(reports)
		if len(problems) == 0 || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(min(200*time.Millisecond, time.Until(deadline)))
	}
	if jsonOut {
		printStatusJSON(stdout, cl, reports)
	} else {
		printStatusTable(stdout, reports)
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "permitd status: degraded: %s\n", c.cliHints(oneLine(strings.Join(problems, "; "))))
		return exitFailure
	}
	return exitOK
}

// nodeReport is one server's answer to GET /v1/status.
type nodeReport struct {
	server string // as given in --servers, or as the cluster view gives it
	// member is the ID of the member whose HTTP address, from the cluster
	// view, server is ("" for an address of --servers).
	member string
	status client.Status
	err    error
}

// queryStatus asks every server at once: the addresses of --servers
// (members nil), or those the cluster view gives members[i].
func queryStatus(ctx context.Context, cl *client.Client, servers, members []string) []nodeReport {
	out := make([]nodeReport, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := cl.StatusOf(ctx, s)
			out[i] = nodeReport{server: s, status: st, err: err}
			if members != nil {
				out[i].member = members[i]
			}
		}()
	}
	wg.Wait()
	return out
}

// queryFound asks the members of the cluster view that no report came
// from, at the HTTP addresses the view gives (those that it gives and
// --servers does not), so that one node's address is enough to check
// them all.
func queryFound(ctx context.Context, cl *client.Client, reports []nodeReport, servers []string) []nodeReport {
	asked := map[string]bool{}
	for _, s := range servers {
		asked[hostPort(s)] = true
	}
	answered := map[string]bool{}
	for _, r := range reports {
		if r.err == nil {
			answered[r.status.ID] = true
		}
	}
	var addrs, ids []string
	for _, m := range clusterView(reports) {
		if !answered[m.ID] && m.HTTPAddr != "" && !asked[m.HTTPAddr] {
			asked[m.HTTPAddr] = true
			addrs, ids = append(addrs, m.HTTPAddr), append(ids, m.ID)
		}
	}
	if len(addrs) == 0 {
		return nil
	}
	return queryStatus(ctx, cl, addrs, ids)
}

// hostPort is the "host:port" of a --servers item ("host:port" or a URL).
func hostPort(server string) string {
	if _, rest, ok := strings.Cut(server, "://"); ok {
		server = rest
	}
	return strings.TrimSuffix(server, "/")
}

// statusProblems lists why the cluster is degraded (nothing if healthy).
func statusProblems(reports []nodeReport) []string {
	var problems []string
	answered := map[string]bool{}
	leaders := map[string][]string{} // leader ID → nodes that name it
	unreachable := 0
	foundDown := map[string]bool{} // members unreachable at their HTTP address from the cluster view
	for _, r := range reports {
		if r.err != nil && r.member != "" {
			foundDown[r.member] = true
			problems = append(problems, fmt.Sprintf("%s unreachable at %s, its HTTP address in the cluster view (%s)", r.member, r.server, shortNetError(r.err)))
			continue
		}
		if r.err != nil {
			unreachable++
			problems = append(problems, fmt.Sprintf("%s unreachable (%s)", r.server, shortNetError(r.err)))
			continue
		}
		st := r.status
		answered[st.ID] = true
		if st.LeaderID == "" {
			problems = append(problems, fmt.Sprintf("%s knows no leader (state %s)", st.ID, st.State))
		} else {
			leaders[st.LeaderID] = append(leaders[st.LeaderID], st.ID)
		}
		if !st.Ready && st.LeaderID != "" {
			problems = append(problems, fmt.Sprintf("%s not ready (applied %d of %d)", st.ID, st.AppliedIndex, st.CommitIndex))
		}
	}
	members := clusterView(reports)
	if len(answered) == 0 {
		return append(problems, "no node answered")
	}
	if len(leaders) > 1 {
		var parts []string
		for l, ns := range leaders {
			parts = append(parts, strings.Join(ns, ",")+" follow "+l)
		}
		sort.Strings(parts)
		problems = append(problems, "nodes disagree on the leader ("+strings.Join(parts, "; ")+")")
	}
	var missing, silentVoters []string
	voters := 0
	for _, m := range members {
		switch {
		case !m.Voter:
			problems = append(problems, pendingProblem(m))
		case foundDown[m.ID]:
			silentVoters = append(silentVoters, m.ID)
		case !answered[m.ID]:
			missing = append(missing, fmt.Sprintf("%s (raft %s)", m.ID, m.RaftAddr))
			silentVoters = append(silentVoters, m.ID)
		}
		if m.Voter {
			voters++
		}
	}
	if quorum := voters/2 + 1; len(leaders) == 0 && voters-len(silentVoters) < quorum {
		problems = append(problems, fmt.Sprintf("no leader: %d of %d voters answer; a leader needs %d: start the others (%s) or check the network",
			voters-len(silentVoters), voters, quorum, strings.Join(silentVoters, ", ")))
	}
	return append(problems, missingProblem(missing, unreachable)...)
}

// missingProblem says which members of the configuration no answer came
// from, neither at an address of --servers nor at one the cluster view
// gives (no node that answered knows theirs: none has heard from them
// since it started): with no unreachable address among --servers they
// were not asked; with some, as many of them may be behind those
// addresses, and the rest were not asked.
func missingProblem(missing []string, unreachable int) []string {
	switch {
	case len(missing) <= unreachable:
		return nil
	case unreachable == 0:
		return []string{fmt.Sprintf("members %s were not asked: no node that answered knows their HTTP addresses (none has heard from them since it started: not started, or down?) and --servers does not give them",
			strings.Join(missing, ", "))}
	default:
		return []string{fmt.Sprintf("members %s did not answer: at most %d of them can be behind the unreachable addresses above, the rest were not asked: no node that answered knows their HTTP addresses (none has heard from them since it started) and --servers does not give them",
			strings.Join(missing, ", "), unreachable)}
	}
}

// clusterView is the raft configuration as the leader sees it (with its
// view of the non-voters' progress), else as any node that answered does.
func clusterView(reports []nodeReport) []client.Server {
	var members []client.Server
	for _, r := range reports {
		if r.err == nil && (members == nil || r.status.State == "leader") {
			members = r.status.Servers
		}
	}
	return members
}

// pendingProblem says why joined non-voter m does not vote yet.
func pendingProblem(m client.Server) string {
	p := m.Promotion
	if p == nil {
		return fmt.Sprintf("%s (raft %s) joined and does not vote yet (no answer from the leader says how far it has come)", m.ID, m.RaftAddr)
	}
	why := p.State
	if p.Reason != "" {
		why += ": " + p.Reason
	}
	return fmt.Sprintf("%s (raft %s) joined and does not vote yet, watched by the leader for %s: %s; the leader makes it a voter once it has caught up: remove it (permitd cluster remove %s) if it never will",
		m.ID, m.RaftAddr, formatContact(time.Duration(p.WatchedNs)), why, m.ID)
}

// printStatusTable prints one row per server, then one per joined server
// that does not vote yet.
func printStatusTable(w io.Writer, reports []nodeReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tSTATE\tLEADER\tTERM\tAPPLIED/COMMIT\tREADY\tCONTACT")
	for _, r := range reports {
		if r.err != nil {
			id := r.member // known for an address the cluster view gave
			if id == "" {
				id = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\tunreachable\t-\t-\t-\t-\t-\n", id, r.server)
			continue
		}
		st := r.status
		leader, contact := st.LeaderID, "-"
		if leader == "" {
			leader = "(none)"
		}
		if st.State != "leader" && st.LastContactNs > 0 {
			contact = formatContact(time.Duration(st.LastContactNs))
		}
		ready := "no"
		if st.Ready {
			ready = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d/%d\t%s\t%s\n", st.ID, r.server, st.State, leader, st.Term,
			st.AppliedIndex, st.CommitIndex, ready, contact)
	}
	tw.Flush()
	var pending []client.Server
	for _, m := range clusterView(reports) {
		if !m.Voter {
			pending = append(pending, m)
		}
	}
	if len(pending) == 0 {
		return
	}
	fmt.Fprintln(w, "\nJoined, not voting yet (the leader promotes a server once it has caught up):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRAFT\tSTATE\tAPPLIED/COMMIT\tWATCHED\tCAUGHT UP\tREASON")
	for _, m := range pending {
		p := m.Promotion
		if p == nil {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t(the leader did not answer)\n", m.ID, m.RaftAddr)
			continue
		}
		reason, caughtUp := p.Reason, "-"
		if reason == "" {
			reason = "-"
		}
		if p.CaughtUpNs > 0 {
			caughtUp = formatContact(time.Duration(p.CaughtUpNs))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", m.ID, m.RaftAddr, p.State, p.AppliedIndex, p.LeaderCommitIndex,
			formatContact(time.Duration(p.WatchedNs)), caughtUp, reason)
	}
	tw.Flush()
}

// formatContact formats a time since the last contact for the table:
// milliseconds under a minute, seconds above.
func formatContact(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return "<1ms"
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// shortNetError is the network part of a failed status request
// ("dial tcp 10.0.0.3:8001: connect: connection refused") with the
// client's hint if the address is not an API port of the client's kind
// (a raft port, a TLS port asked in plain HTTP), or the whole error worded
// by describeError.
func shortNetError(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		if hint := client.PortHint(err); hint != "" {
			return op.Error() + "; " + hint
		}
		return op.Error()
	}
	return describeError(err)
}

// printStatusJSON prints the answers keyed by server URL.
func printStatusJSON(w io.Writer, cl *client.Client, reports []nodeReport) {
	out := map[string]any{}
	urls := cl.Servers()
	scheme, _, _ := strings.Cut(urls[0], "://")
	for i, r := range reports {
		key := scheme + "://" + r.server // an address the cluster view gave
		if i < len(urls) {
			key = urls[i]
		}
		if r.err != nil {
			out[key] = map[string]string{"error": describeError(r.err)}
			continue
		}
		out[key] = r.status
	}
	printJSON(w, out)
}

// dedupe drops repeated items, keeping the first.
func dedupe(items []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range items {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
