package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/permitd/permitd/transport/auth"
)

func init() {
	register("tokens", "make API tokens for a token file: create", runTokens)
}

// tokensSubcommands are the subcommands of "permitd tokens".
var tokensSubcommands = []subcommand{
	{"create", "make a new secret and print it with its token file line", runTokensCreate},
}

func runTokens(args []string, stdout, stderr io.Writer) int {
	return commandGroup{"tokens", "Makes API tokens: a secret for the caller, a line for the agents' token file.\n", tokensSubcommands}.run(args, stdout, stderr)
}

func runTokensCreate(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("tokens create", "tokens create --role admin|client|worker --name NAME [--limits PATTERN,...]", `
Makes a new random secret (pmt_ and 43 characters: 256 bits) and prints two
lines: the secret, to give to the client or worker that will send it as
"Authorization: Bearer SECRET", and the line to add to the agents' token
file, which holds only the secret's SHA-256:

  NAME ROLE sha256:HEX [limits=PATTERN,...]

Roles: admin (limits, lease policy, cluster membership, snapshots), client
(reserve and read limits; --limits restricts it to the limits whose names
match a pattern: '*', '?', '[...]'), worker (lease, renew, return). The
secret is printed once and kept nowhere.

Agents read the file given by --token-file at start and again on SIGHUP.

Exit status: 0 ok; 2 usage error.
`, stdout, stderr)
	var role, name, limits string
	c.Choice(&role, "role", "", "what the token may do", "admin", "client", "worker")
	c.String(&name, "name", "NAME", "", "the token's name in the file, logs and errors (required)")
	c.List(&limits, "limits", "PATTERN,...", "", "client tokens: only the limits matching these patterns")
	if ok, code := c.parse(args); !ok {
		return code
	}
	if role == "" || name == "" {
		return c.usageError("--role and --name are required")
	}
	secret, line, err := auth.NewSecret(name, auth.Role(role), splitList(limits))
	if err != nil {
		if errors.Is(err, auth.ErrInvalid) {
			return c.usageError(err.Error())
		}
		return c.fail(exitFailure, err)
	}
	fmt.Fprintf(stdout, "secret: %s\ntoken file line: %s\n", secret, line)
	return exitOK
}
