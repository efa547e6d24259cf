package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// Logging of the agent and the worker.
//
// The default level is info, as etcd's, Consul's and CockroachDB's: at
// that level a node logs one line when it starts listening (its HTTP and
// raft addresses), when it becomes leader ("leading: cluster timeline
// continues"), when it loses leadership ("leadership lost"), and
// membership changes; nothing per request.
//
// Libraries get one level more (info → warn): raft's, raft-net's and the
// snapshot store's info lines ("entering follower state", "pipelining
// replication", ...) and memberlist's show at --log-level debug.
//
// Raft reports a peer that is down, or an election in progress, at WARN
// and ERROR, once per heartbeat back-off for as long as the peer stays
// down ("failed to contact", "failed to heartbeat to", "failed to
// appendEntries to", "no known peers, aborting election", ...). These are
// the expected consequence of a node being down, which permitd status
// reports (exit 1); logged as errors they read as alarms that something
// is broken on this node. routineRaftLogger logs them at info in raft's
// logger, so that they show from --log-level debug, and leaves raft's
// other warnings and errors (a failing disk, a snapshot that cannot be
// taken, losing the quorum) where raft put them.

// logLevels are the values of --log-level.
var logLevels = []string{"trace", "debug", "info", "warn", "error"}

// logFormats are the values of --log-format.
var logFormats = []string{"text", "json"}

// newLogger returns the root logger of an agent or worker named name.
func newLogger(name, level, format string, out io.Writer) hclog.Logger {
	lvl := hclog.LevelFromString(level)
	return hclog.New(&hclog.LoggerOptions{
		Name:              name,
		Level:             lvl,
		Output:            out,
		JSONFormat:        format == "json",
		IndependentLevels: true,
		SubloggerHook:     func(sub hclog.Logger) hclog.Logger { return quietLibraries(name, lvl, sub) },
	})
}

// libraryLoggers are the named sub-loggers node/ and transport/worker hand to
// raft and memberlist.
var libraryLoggers = []string{"raft", "raft-net", "snapshots", "memberlist"}

// quietLibraries gives the sub-loggers of libraries one level more than
// the root's and wraps raft's in routineRaftLogger; other sub-loggers are
// returned unchanged. It runs for every sub-logger hclog creates (Named,
// With, ResetNamed), so loggers derived from raft's are covered too.
func quietLibraries(root string, level hclog.Level, sub hclog.Logger) hclog.Logger {
	lib, n := "", sub.Name()
	for _, l := range libraryLoggers {
		if n == root+"."+l || strings.HasPrefix(n, root+"."+l+".") {
			lib = l
		}
	}
	if lib == "" {
		return sub
	}
	if level < hclog.Error && level != hclog.NoLevel {
		sub.SetLevel(level + 1)
	}
	if lib == "memberlist" {
		return sub
	}
	return routineRaftLogger{sub}
}

// routineRaftMessages are the messages raft logs at WARN or ERROR while a
// peer is down or an election runs (raft v1.7: raft.go, replication.go).
var routineRaftMessages = map[string]bool{
	"failed to contact":                                      true,
	"failed to heartbeat to":                                 true,
	"failed to appendEntries to":                             true,
	"failed to pipeline appendEntries":                       true,
	"failed to start pipeline replication to":                true,
	"failed to make requestVote RPC":                         true,
	"no known peers, aborting election":                      true,
	"heartbeat timeout reached, starting election":           true,
	"Election timeout reached, restarting election":          true,
	"rejecting vote request since we have a leader":          true,
	"rejecting pre-vote request since we have a leader":      true,
	"peer has newer term, stopping replication":              true,
	"rejecting vote request since our last index is greater": true,
}

// routineRaftLogger logs raft's routine messages (routineRaftMessages) at
// info instead of warn or error.
type routineRaftLogger struct{ hclog.Logger }

// Log implements hclog.Logger.
func (l routineRaftLogger) Log(level hclog.Level, msg string, args ...any) {
	if level > hclog.Info && routineRaftMessages[msg] {
		level = hclog.Info
	}
	l.Logger.Log(level, msg, args...)
}

// Warn implements hclog.Logger.
func (l routineRaftLogger) Warn(msg string, args ...any) { l.Log(hclog.Warn, msg, args...) }

// Error implements hclog.Logger.
func (l routineRaftLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

// failureReporter reports the failures of a running agent, worker or
// relay (cmd, after its logger exists): as an error log entry with
// --log-format json, so that stderr stays one JSON object per line, else
// as one plain line "permitd CMD: what: error".
type failureReporter struct {
	stderr      io.Writer
	logger      hclog.Logger
	format, cmd string
}

// report reports err, what failed.
func (r failureReporter) report(what string, err error) {
	if r.format == "json" {
		r.logger.Error(what, "error", oneLine(err.Error()))
		return
	}
	fmt.Fprintf(r.stderr, "permitd %s: %s: %s\n", r.cmd, what, oneLine(err.Error()))
}
