package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// clientFlags are the flags of every command that talks to a cluster.
type clientFlags struct {
	servers string
	timeout time.Duration
	tls     clientTLSFlags
	// c is the command line the flags are defined on.
	c *cmdLine
}

// define adds --servers and --timeout to c.
func (f *clientFlags) define(c *cmdLine) {
	c.List(&f.servers, "servers", "HTTPADDR,...", "127.0.0.1:8001", "HTTP addresses of the cluster's nodes (the next is tried when one is down)").Check(checkServer)
	c.Duration(&f.timeout, "timeout", 10*time.Second, durPositive, "how long the command's requests may take in all")
	f.tls.define(c)
	c.fromEnv("servers")
	f.c = c
}

// client returns a client of --servers and a context bounded by --timeout.
func (f *clientFlags) client(opts ...client.Option) (*client.Client, context.Context, context.CancelFunc, error) {
	return f.clientHeld(0, opts...)
}

// clientHeld is client for a call whose answer the server may hold for up
// to held (a reserve that waits in an in-flight cap's queue): its context
// is bounded by --timeout plus held.
func (f *clientFlags) clientHeld(held time.Duration, opts ...client.Option) (*client.Client, context.Context, context.CancelFunc, error) {
	tlsOpts, err := f.tls.options()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w%s", err, f.c.envNote())
	}
	cl, err := newClient(f.servers, append(opts, tlsOpts...)...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w%s", err, f.c.envNote())
	}
	limit := f.timeout + held
	if held > 0 && limit < f.timeout {
		limit = math.MaxInt64 // saturate
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	return cl, ctx, cancel, nil
}

// printCall is the body of a command that makes one call and prints its
// answer as JSON (exit 0): see runCall.
func printCall[T any](c *cmdLine, cf *clientFlags, stdout io.Writer, call func(context.Context, *client.Client) (T, error)) int {
	return runCall(c, cf, call, func(v T) int {
		printJSON(stdout, v)
		return exitOK
	})
}

// runCall is the body of a command that makes one call: it builds the
// client of cf (a bad --servers is a usage error, exit 2), runs call under
// --timeout, and hands its answer to done, whose exit code it returns, or
// fails with the exit code the error's kind maps to.
func runCall[T any](c *cmdLine, cf *clientFlags, call func(context.Context, *client.Client) (T, error), done func(T) int) int {
	cl, ctx, cancel, err := cf.client()
	if err != nil {
		return c.usageError(err.Error())
	}
	defer cancel()
	v, err := call(ctx, cl)
	if err != nil {
		return c.fail(exitCodeOf(err), err)
	}
	return done(v)
}

// newClient returns a client of servers (a --servers value), with an
// error that names the flag.
func newClient(servers string, opts ...client.Option) (*client.Client, error) {
	cl, err := client.New(splitList(servers), opts...)
	if err != nil {
		return nil, fmt.Errorf("--servers %q: %s", servers, describeError(err))
	}
	return cl, nil
}

// checkServer validates one --servers item.
func checkServer(s string) error {
	if _, err := client.New([]string{s}); err != nil {
		return fmt.Errorf("%q is not a server address; allowed: \"host:port\" or \"http://host:port\"", s)
	}
	return nil
}

// checkHostPort validates a HOST:PORT setting (the host may be empty, for
// every interface).
func checkHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not HOST:PORT (%v)", s, strings.TrimPrefix(err.Error(), "address "+s+": "))
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q: port %q; allowed: 0-65535", s, port)
	}
	return nil
}

// checkName validates a limit or server name as the HTTP API does:
// 1-128 characters of [A-Za-z0-9_.:-].
func checkName(what, s string) error {
	if len(s) == 0 || len(s) > 128 {
		return fmt.Errorf("%s %q has %d characters; allowed: 1-128 characters of [A-Za-z0-9_.:-]", what, s, len(s))
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == ':' || r == '-') {
			return fmt.Errorf("%s %q contains %q; allowed: 1-128 characters of [A-Za-z0-9_.:-]", what, s, r)
		}
	}
	return nil
}

// printJSON writes v as indented JSON; the error is the encoder's (a NaN,
// for one, cannot be written), which most callers' values cannot cause.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printLine writes v as one line of JSON (for output that scripts read line
// by line).
func printLine(w io.Writer, v any) {
	_ = json.NewEncoder(w).Encode(v)
}
