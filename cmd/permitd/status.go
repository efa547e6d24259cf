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
Asks every node of --servers for its status and prints one row per node:

  ID       the node's ID
  ADDRESS  the HTTP address it was asked at
  STATE    leader, follower or candidate, or unreachable
  LEADER   the leader it knows
  TERM     its raft term
  APPLIED/COMMIT  its applied index and its commit index
  READY    whether it serves requests (knows a leader, applied its log)
  CONTACT  how long ago it last heard from the leader (followers)

With --json it prints the nodes' answers as a JSON object keyed by server
URL instead ({"error":...} for a node that did not answer).

The cluster is healthy when every node of --servers answered, all are
ready and agree on a leader, and every member of the raft configuration
is among them. Otherwise the reasons are printed on stderr, on one line.
--wait D asks again until the cluster is healthy or D has passed (for
scripts that start a cluster).

Exit status: 0 healthy; 1 degraded (a node unreachable or not ready, no
leader, a member not checked); 2 usage error.
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
		return c.usageError(err.Error())
	}
	cl, err := newClient(strings.Join(servers, ","), tlsOpts...)
	if err != nil {
		return c.usageError(err.Error())
	}
	deadline := time.Now().Add(wait)
	var reports []nodeReport
	var problems []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
		reports = queryStatus(ctx, cl, servers)
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
		fmt.Fprintf(stderr, "permitd status: degraded: %s\n", oneLine(strings.Join(problems, "; ")))
		return exitFailure
	}
	return exitOK
}

// nodeReport is one server's answer to GET /v1/status.
type nodeReport struct {
	server string // as given in --servers
	status client.Status
	err    error
}

// queryStatus asks every server at once.
func queryStatus(ctx context.Context, cl *client.Client, servers []string) []nodeReport {
	out := make([]nodeReport, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := cl.StatusOf(ctx, s)
			out[i] = nodeReport{server: s, status: st, err: err}
		}()
	}
	wg.Wait()
	return out
}

// statusProblems lists why the cluster is degraded (nothing if healthy).
func statusProblems(reports []nodeReport) []string {
	var problems []string
	answered := map[string]bool{}
	leaders := map[string][]string{} // leader ID → nodes that name it
	unreachable := 0
	var members []client.Server
	for _, r := range reports {
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
		// The configuration as the leader sees it, else as anyone does.
		if members == nil || st.State == "leader" {
			members = st.Servers
		}
	}
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
	var missing []string
	for _, m := range members {
		if !answered[m.ID] {
			missing = append(missing, fmt.Sprintf("%s (raft %s)", m.ID, m.RaftAddr))
		}
	}
	// An unreachable address may be any missing member; more missing
	// members than unreachable addresses means some were never asked.
	if len(missing) > unreachable {
		problems = append(problems, fmt.Sprintf("members %s did not answer: give every node's HTTP address in --servers",
			strings.Join(missing, ", ")))
	}
	return problems
}

// printStatusTable prints one row per server.
func printStatusTable(w io.Writer, reports []nodeReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tSTATE\tLEADER\tTERM\tAPPLIED/COMMIT\tREADY\tCONTACT")
	for _, r := range reports {
		if r.err != nil {
			fmt.Fprintf(tw, "-\t%s\tunreachable\t-\t-\t-\t-\t-\n", r.server)
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
// ("dial tcp 10.0.0.3:8001: connect: connection refused"), or the whole
// error worded by describeError.
func shortNetError(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Error()
	}
	return describeError(err)
}

// printStatusJSON prints the answers keyed by server URL.
func printStatusJSON(w io.Writer, cl *client.Client, reports []nodeReport) {
	out := map[string]any{}
	urls := cl.Servers()
	for i, r := range reports {
		key := urls[i]
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
