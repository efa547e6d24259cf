package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/client"
)

// snapshot.go: backups, as `etcdctl snapshot save / restore` does them.

func init() {
	register("snapshot", "back up the register to a file, or seed a new cluster from one", runSnapshot)
}

// snapshotSubcommands are the subcommands of "permitd snapshot".
var snapshotSubcommands = []subcommand{
	{"save", "write the leader's consistent snapshot to a file", runSnapshotSave},
	{"restore", "seed a new node's empty data directory from a snapshot file", runSnapshotRestore},
}

func runSnapshot(args []string, stdout, stderr io.Writer) int {
	return commandGroup{"snapshot", "Backs up the register (every limit, its pacer state, the leases, request IDs,\nsessions and the cluster time) and seeds new clusters from a backup.\n", snapshotSubcommands}.run(args, stdout, stderr)
}

func runSnapshotSave(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("snapshot save", "snapshot save FILE [--servers HTTPADDR,...]", `
Writes a consistent snapshot of the register to FILE, taken on the leader
after everything committed so far, and prints the file, its size and the
log index it holds. FILE is written whole or not at all (through a
temporary file in its directory).

`+exitStatusText, stdout, stderr)
	c.args("FILE")
	var cf clientFlags
	cf.define(c)
	if ok, code := c.parse(args); !ok {
		return code
	}
	file := c.arg(0)
	var buf bytes.Buffer
	save := func(ctx context.Context, cl *client.Client) (uint64, error) { return cl.SaveSnapshot(ctx, &buf) }
	return runCall(c, &cf, save, func(index uint64) int {
		if err := writeWhole(file, buf.Bytes()); err != nil {
			return c.fail(exitFailure, err)
		}
		printJSON(stdout, map[string]any{"file": file, "bytes": buf.Len(), "applied_index": index})
		return exitOK
	})
}

// writeWhole writes data to file through a temporary file in the same
// directory, so that file is never half written.
func writeWhole(file string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".permitd-snapshot-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

func runSnapshotRestore(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("snapshot restore", "snapshot restore FILE --data-dir DIR --id ID (--initial-cluster ID=RAFTADDR,... | --raft-addr HOST:PORT)", `
Seeds the empty data directory DIR of one node of a NEW cluster from FILE
(written by "permitd snapshot save"). Restore every node of the new cluster
from the same FILE with the same --initial-cluster (or a one-node cluster
with --raft-addr), then start each with "permitd agent --id ID --data-dir
DIR --raft-addr ... --http-addr ..." and neither --initial-cluster nor
--join: the seed holds the cluster's members.

Exit status: 0 ok; 1 failure (FILE unreadable or not a snapshot, DIR not
empty or not writable); 2 usage error (nothing written).
`, stdout, stderr)
	c.args("FILE")
	var dataDir, id, initial, raftAddr string
	c.String(&dataDir, "data-dir", "DIR", "", "the new node's empty data directory (required)")
	c.String(&id, "id", "ID", "", "the new node's ID (required)").Check(func(s string) error { return checkName("node ID", s) })
	c.List(&initial, "initial-cluster", "ID=HOST:PORT,...", "", "the new cluster's voters and their raft addresses (the same on every node)").Check(checkInitialItem)
	c.String(&raftAddr, "raft-addr", "HOST:PORT", "", "the raft address of a one-node cluster (instead of --initial-cluster)").Check(checkHostPort)
	if ok, code := c.parse(args); !ok {
		return code
	}
	file := c.arg(0)
	if dataDir == "" || id == "" {
		return c.usageError("--data-dir and --id are required")
	}
	var servers []raft.Server
	switch {
	case initial != "" && raftAddr != "":
		return c.usageError("give --initial-cluster or --raft-addr, not both")
	case initial != "":
		var err error
		if servers, err = parseInitialCluster(initial); err != nil {
			return c.usageError(err.Error())
		}
	case raftAddr != "":
		servers = []raft.Server{{ID: raft.ServerID(id), Address: raft.ServerAddress(raftAddr), Suffrage: raft.Voter}}
	default:
		return c.usageError("--initial-cluster (or --raft-addr for a one-node cluster) is required")
	}
	member := false
	for _, s := range servers {
		member = member || string(s.ID) == id
	}
	if !member {
		return c.usageErrorf("--id %q is not in the new cluster's members (--initial-cluster %s)", id, initial)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return c.fail(exitFailure, err)
	}
	index, err := node.SeedDataDir(dataDir, data, servers)
	if err != nil {
		return c.fail(exitFailure, errors.New(node.Message(err)))
	}
	printJSON(stdout, map[string]any{"data_dir": dataDir, "id": id, "applied_index": index, "members": len(servers)})
	return exitOK
}
