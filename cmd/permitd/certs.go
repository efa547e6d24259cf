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
Makes, in DIR (created with its parents), a certificate authority (ca.crt,
ca.key) and signs with it one certificate per node (node-ID.crt,
node-ID.key: server and client authentication, for the client API and the
nodes' mutual-TLS Raft transport; subject alternative names from --hosts)
and one per client (client-NAME.crt, client-NAME.key: client
authentication). Keys are ECDSA P-256 in PEM, written with mode 0600.

Run it again with the same arguments and it changes nothing: files that
exist and fit the request are kept (the CA in DIR; a node's pair signed by
that CA, covering every --hosts entry, not expired, the key the
certificate's; a client's likewise), only missing ones are made (a node
added later is signed by the same CA), and each file is listed as "kept"
or "made". An existing file that does not fit (another CA's, a host
missing, expired, unreadable, half a pair, a key of another certificate)
is an error naming the file, what is wrong and the fix (delete it, or
choose another --out), and nothing is written. Files are never replaced.

For development and tests: a production deployment brings its own PKI.

Example: permitd certs create --out secure/certs --nodes n1,n2,n3 --hosts 127.0.0.1,localhost --clients admin,worker

Exit status: 0 ok (made or kept); 1 an existing file does not fit, or a
file cannot be written (nothing replaced); 2 usage error (nothing written).
`, stdout, stderr)
	var out, nodes, hosts, clients string
	var days int
	c.String(&out, "out", "DIR", "", "output folder (required; created with its parents, mode 0700)")
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
		var unfit *devcerts.UnfitError
		if errors.As(err, &unfit) {
			err = errors.New(unfit.Explain("--out"))
		}
		return c.fail(exitFailure, err)
	}
	for _, f := range res.Kept {
		fmt.Fprintf(stdout, "kept %s\n", filepath.Join(out, f))
	}
	for _, f := range res.Written {
		fmt.Fprintf(stdout, "made %s\n", filepath.Join(out, f))
	}
	return exitOK
}
