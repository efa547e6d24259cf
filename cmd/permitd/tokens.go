package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

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
	c := newCmdLine("tokens create", "tokens create --role admin|client|worker --name NAME [--limits PATTERN,...] [--token-file FILE]", `
Makes a new random secret (pmt_ and 43 characters: 256 bits) and prints two
lines: the secret, to give to the client or worker that will send it as
"Authorization: Bearer SECRET", and the line to add to the agents' token
file, which holds only the secret's SHA-256:

  NAME ROLE sha256:HEX [limits=PATTERN,...]

With --token-file FILE it writes that line into FILE itself (the file the
agents' --token-file names; created with mode 0600, with its folder),
replacing the line of the same NAME (a rotation: the old secret stops
working once the agents reload) and keeping every other line and comment,
and prints only the secret on stdout:

  permitd tokens create --role client --name app --token-file secure/tokens > secure/app.token

An existing FILE that is not a valid token file is an error naming the
line, and FILE is left as it was.

Roles: admin (limits, lease policy, cluster membership, snapshots), client
(reserve and read limits; --limits restricts it to the limits whose names
match a pattern: '*', '?', '[...]'), worker (lease, renew, return). The
secret is printed once and kept nowhere.

Agents read the file given by --token-file at start and again on SIGHUP
(kill -HUP PID): send it to every agent after changing the file.

Exit status: 0 ok; 1 FILE cannot be read or written; 2 usage error, or FILE
is not a valid token file (FILE unchanged).
`, stdout, stderr)
	var role, name, limits, file string
	c.Choice(&role, "role", "", "what the token may do", "admin", "client", "worker")
	c.String(&name, "name", "NAME", "", "the token's name in the file, logs and errors (required)")
	c.List(&limits, "limits", "PATTERN,...", "", "client tokens: only the limits matching these patterns")
	c.String(&file, "token-file", "FILE", "", "write the line into this token file (replacing the line of the same --name) and print only the secret")
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
	if file == "" {
		fmt.Fprintf(stdout, "secret: %s\ntoken file line: %s\n", secret, line)
		return exitOK
	}
	replaced, err := setTokenLine(file, line)
	if err != nil {
		if errors.Is(err, auth.ErrInvalid) {
			return c.usageError(fmt.Sprintf("--token-file %s: %v (the file is unchanged)", file, strings.TrimPrefix(err.Error(), "auth: invalid: ")))
		}
		return c.fail(exitFailure, fmt.Errorf("--token-file %s: %w", file, err))
	}
	what := "added"
	if replaced {
		what = "replaced"
	}
	fmt.Fprintf(stderr, "permitd tokens create: %s the line of %s in %s; agents re-read it on SIGHUP (kill -HUP each agent's PID)\n", what, name, file)
	fmt.Fprintln(stdout, secret)
	return exitOK
}

// setTokenLine puts line into the token file at path (see auth.SetLine),
// creating it with mode 0600 (and its folder, 0700) if missing, else
// keeping its mode, owner and group (an agent running as its own user
// reads a root-owned file through its group: a new owner would lock it
// out at its next reload). It writes a temporary file beside it and
// renames it over the old one, so that an agent reloading meanwhile reads
// the old file or the new, never half of one.
func setTokenLine(path, line string) (replaced bool, err error) {
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	mode := os.FileMode(0o600)
	var old os.FileInfo
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if st, err := os.Stat(path); err == nil {
			mode, old = st.Mode().Perm(), st
		}
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return false, err
		}
	default:
		return false, err
	}
	out, replaced, err := auth.SetLine(data, line)
	if err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return false, err
	}
	if err := keepOwner(tmp, old); err != nil {
		tmp.Close()
		return false, fmt.Errorf("%s: keep its owner and group: %w (run as a user who may, such as root)", path, err)
	}
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	return replaced, os.Rename(tmp.Name(), path)
}

// keepOwner gives f the owner and group of old (nothing if old is nil or
// already f's), so that replacing a file keeps who may read it.
func keepOwner(f *os.File, old os.FileInfo) error {
	if old == nil {
		return nil
	}
	st, ok := old.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	cur, err := f.Stat()
	if err != nil {
		return err
	}
	if c, ok := cur.Sys().(*syscall.Stat_t); ok && c.Uid == st.Uid && c.Gid == st.Gid {
		return nil
	}
	return f.Chown(int(st.Uid), int(st.Gid))
}
