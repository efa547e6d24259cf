package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/permitd/permitd/transport/devcerts"
)

func init() {
	register("certs", "make a CA and node and client certificates for TLS: create", runCerts)
}

// certsSubcommands are the subcommands of "permitd certs".
var certsSubcommands = []subcommand{
	{"create", "make a CA (or reuse the folder's) and node and client certificates", runCertsCreate},
}

func runCerts(args []string, stdout, stderr io.Writer) int {
	return commandGroup{"certs", "Makes certificates for permitd's TLS (development, tests, the README's secure cluster).\n", certsSubcommands}.run(args, stdout, stderr)
}

func runCertsCreate(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("certs create", "certs create --out DIR [--nodes ID,...] [--hosts HOST,...] [--clients NAME,...] [--days N]", `
Makes, in DIR, a certificate authority (ca.crt, ca.key) and signs with it
one certificate per node (node-ID.crt, node-ID.key: server and client
authentication, for the client API and the nodes' mutual-TLS Raft
transport; subject alternative names from --hosts) and one per client
(client-NAME.crt, client-NAME.key: client authentication). Keys are ECDSA
P-256 in PEM, written with mode 0600. An existing ca.crt and ca.key in DIR
are reused, so that a node added later is signed by the same CA; any other
file that exists is an error and nothing is written.

For development and tests: a production deployment brings its own PKI.

Example: permitd certs create --out certs --nodes n1,n2,n3 --hosts 127.0.0.1,localhost --clients admin,worker

Exit status: 0 ok; 1 a file exists or cannot be written (nothing replaced);
2 usage error (nothing written).
`, stdout, stderr)
	var out, nodes, hosts, clients string
	var days int
	c.String(&out, "out", "DIR", "", "output folder (required; created with mode 0700)")
	c.List(&nodes, "nodes", "ID,...", "", "node IDs: a certificate each")
	c.List(&hosts, "hosts", "HOST,...", "127.0.0.1,localhost", "IP addresses and DNS names every node certificate is valid for")
	c.List(&clients, "clients", "NAME,...", "", "client names: a certificate each")
	c.Int(&days, "days", "N", 365, "validity in days (a certificate never outlives its CA)").Range(1, 3650, "1-3650")
	if ok, code := c.parse(args); !ok {
		return code
	}
	if out == "" {
		return c.usageError("--out is required")
	}
	req := devcerts.Request{Dir: out, Nodes: splitList(nodes), Hosts: splitList(hosts), Clients: splitList(clients),
		Validity: time.Duration(days) * 24 * time.Hour, Now: time.Now()}
	if err := req.Validate(); err != nil {
		return c.usageError(err.Error())
	}
	res, err := devcerts.Create(req)
	if err != nil {
		if errors.Is(err, devcerts.ErrInvalid) {
			return c.usageError(err.Error())
		}
		return c.fail(exitFailure, err)
	}
	if res.ReusedCA {
		fmt.Fprintf(stdout, "reused %s\n", filepath.Join(out, devcerts.CACert))
	}
	for _, f := range res.Written {
		fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(out, f))
	}
	return exitOK
}
