package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/node"
)

// snapshot.go: backups, as `etcdctl snapshot save / restore` does them.

func init() {
	register("snapshot", "back up the register to a file, or seed a new cluster from one", runSnapshot)
}

func runSnapshot(args []string, stdout, stderr io.Writer) int {
	const usage = `Usage: permitd snapshot save FILE [--servers HTTPADDR,...]
       permitd snapshot restore FILE --data-dir DIR --id ID (--initial-cluster ID=RAFTADDR,... | --raft-addr HOST:PORT)

save writes a consistent snapshot of the register (every limit, its pacer
state, the leases, request IDs and sessions, and the cluster time) to FILE,
taken on the leader after everything committed so far.

restore seeds the empty data directory DIR of one node of a NEW cluster from
FILE. Restore every node of the new cluster from the same FILE with the same
--initial-cluster (or a one-node cluster with --raft-addr), then start each
with "permitd agent --id ID --data-dir DIR --raft-addr ... --http-addr ..."
and no --initial-cluster or --join: the seed holds the cluster's members.
`
	if len(args) == 0 || (args[0] != "save" && args[0] != "restore") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintln(stderr, "permitd snapshot: want \"save\" or \"restore\" (see permitd snapshot --help)")
		return 2
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("snapshot "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	dataDir := fs.String("data-dir", "", "restore: the new node's empty data directory")
	id := fs.String("id", "", "restore: the new node's ID")
	initial := fs.String("initial-cluster", "", "restore: ID=RAFTADDR,... of the new cluster's voters (the same on every node)")
	raftAddr := fs.String("raft-addr", "", "restore: the raft HOST:PORT of a one-node cluster (without --initial-cluster)")
	var file string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		file, args = args[0], args[1:]
	}
	if ok, code := parseFlags(fs, args, usage); !ok {
		return code
	}
	if file == "" && fs.NArg() > 0 {
		file = fs.Arg(0)
	}
	if file == "" {
		fmt.Fprintf(stderr, "permitd snapshot %s: a FILE is required (see permitd snapshot --help)\n", sub)
		return 2
	}
	if sub == "save" {
		return snapshotSave(cf, file, stdout, stderr)
	}
	return snapshotRestore(file, *dataDir, *id, *initial, *raftAddr, stdout, stderr)
}

func snapshotSave(cf commonFlags, file string, stdout, stderr io.Writer) int {
	cl, ctx, cancel, err := cf.client()
	if err != nil {
		fmt.Fprintln(stderr, "permitd snapshot save:", err)
		return 2
	}
	defer cancel()
	var buf bytes.Buffer
	index, err := cl.SaveSnapshot(ctx, &buf)
	if err != nil {
		fmt.Fprintln(stderr, "permitd snapshot save:", err)
		return 1
	}
	// Written to a temporary file first, so that FILE is never half a
	// snapshot.
	tmp, err := os.CreateTemp(filepath.Dir(file), ".permitd-snapshot-*")
	if err == nil {
		_, err = tmp.Write(buf.Bytes())
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), file)
		}
		if err != nil {
			os.Remove(tmp.Name())
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "permitd snapshot save:", err)
		return 1
	}
	printJSON(stdout, map[string]any{"file": file, "bytes": buf.Len(), "applied_index": index})
	return 0
}

func snapshotRestore(file, dataDir, id, initial, raftAddr string, stdout, stderr io.Writer) int {
	if dataDir == "" || id == "" {
		fmt.Fprintln(stderr, "permitd snapshot restore: --data-dir and --id are required (see permitd snapshot --help)")
		return 2
	}
	var servers []raft.Server
	switch {
	case initial != "" && raftAddr != "":
		fmt.Fprintln(stderr, "permitd snapshot restore: give --initial-cluster or --raft-addr, not both")
		return 2
	case initial != "":
		var err error
		if servers, err = parseInitialCluster(initial); err != nil {
			fmt.Fprintln(stderr, "permitd snapshot restore:", err)
			return 2
		}
	case raftAddr != "":
		servers = []raft.Server{{ID: raft.ServerID(id), Address: raft.ServerAddress(raftAddr), Suffrage: raft.Voter}}
	default:
		fmt.Fprintln(stderr, "permitd snapshot restore: --initial-cluster (or --raft-addr for a one-node cluster) is required")
		return 2
	}
	member := false
	for _, s := range servers {
		member = member || string(s.ID) == id
	}
	if !member {
		fmt.Fprintf(stderr, "permitd snapshot restore: --id %q is not in the new cluster's members\n", id)
		return 2
	}
	data, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(stderr, "permitd snapshot restore:", err)
		return 1
	}
	index, err := node.SeedDataDir(dataDir, data, servers)
	if err != nil {
		fmt.Fprintln(stderr, "permitd snapshot restore:", node.Message(err))
		return 1
	}
	printJSON(stdout, map[string]any{"data_dir": dataDir, "id": id, "applied_index": index, "members": len(servers)})
	return 0
}
