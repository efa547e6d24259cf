package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/relay"
	"github.com/permitd/permitd/transport/tlsfiles"
)

func init() {
	register("relay", "run a host's lease relay: send the workers' renewals to the register in batches", runRelay)
}

// relayFlags are permitd relay's settings.
type relayFlags struct {
	listen, servers, metricsAddr string
	listenTLSCert, listenTLSKey  string
	tokenFile                    string
	attemptTimeout               time.Duration
	maxInFlight                  int
	upstream                     string
	insecure                     bool
	tls                          clientTLSFlags
	logLevel, logFormat, config  string
	validate                     bool
}

func (f *relayFlags) define(c *cmdLine) {
	c.String(&f.listen, "listen", "HOST:PORT", "127.0.0.1:7500", "address the workers' lease commands arrive at (give it to each worker as --relay)").Check(checkHostPort)
	c.List(&f.servers, "servers", "HTTPADDR,...", "", "HTTP addresses of the register's agents (required); the relay starts at the leader, or past it with --upstream spread").Check(checkServer)
	c.fromEnv("servers")
	c.Duration(&f.attemptTimeout, "attempt-timeout", 500*time.Millisecond, durPositive, "longest wait for one batch's answer from one register node before the next is tried (10ms-1m)").Range(10*time.Millisecond, time.Minute)
	c.Int(&f.maxInFlight, "max-inflight", "N", relay.DefaultMaxInFlight, "batches with the register at once: the commands that arrive meanwhile leave together in the next").Range(1, 64, "an integer from 1 to 64")
	c.Choice(&f.upstream, "upstream", "leader", "which register node the relay sends its batches to first: leader (a batch costs the leader one call's read and answer; nothing is forwarded) or spread (a follower, as a worker does, which forwards the commands to the leader)", "leader", "spread")
	c.String(&f.listenTLSCert, "listen-tls-cert", "FILE", "", "serve the workers over TLS with this certificate (PEM; needs --listen-tls-key); required when the register is reached over TLS, since a worker talks TLS to all its servers or to none")
	c.String(&f.listenTLSKey, "listen-tls-key", "FILE", "", "the private key of --listen-tls-cert (PEM)")
	c.String(&f.tokenFile, "token-file", "FILE", "", "API tokens the relay requires of the workers (the agents' format; worker or admin role); re-read on SIGHUP")
	c.String(&f.metricsAddr, "metrics-addr", "HOST:PORT", "", "serve Prometheus metrics (the relay's counters, Go runtime, process) at http://HOST:PORT/metrics (a loopback address unless --insecure)").Check(checkHostPort)
	c.Bool(&f.insecure, "insecure", false, "allow --listen on a non-loopback address without TLS and tokens (anyone who reaches it could renew the fleet's leases), and --metrics-addr on one")
	f.tls.define(c)
	c.Choice(&f.logLevel, "log-level", "info", "log level", logLevels...)
	c.Choice(&f.logFormat, "log-format", "text", "log format: text lines, or one JSON object per line", logFormats...)
	c.String(&f.config, "config", "FILE", "", "read settings from this JSON file (default: $PERMITD_CONFIG)")
	c.Bool(&f.validate, "validate", false, "check the settings (flags, environment, config file), print them as a config file and exit")
}

const relayDescription = `
Runs a lease relay for the workers of a host (or of a group). Each worker
renews its lease every TTL/2 with a call of its own; a thousand workers
cost the register a thousand calls a second, and the call (its read,
hand-off and answer) costs a node more than the renewal's decision. The
workers given --relay send their lease commands here instead, and the
relay sends them on to the register together: a command that arrives
while no batch is out leaves at once, alone; the commands that arrive
while one is out (--max-inflight) leave together when it comes back.

The relay decides nothing: the register decides each command as if it
had come alone, so the over-grant bound is unchanged. Each relayed
command must carry a request ID (permitd worker's always do). When the
register does not answer a batch, its commands are answered "no leader"
and each worker retries at its next server, the register's nodes after
the relay, with the same request ID; a worker whose relay is down goes
to the register directly.

The relay sends its batches to the register's leader (--upstream leader,
the default: a batch costs the leader one call, and nothing is forwarded),
or to a follower, as a worker does (--upstream spread). After a change of
leader its batches go to whichever node answers.

Upstream the relay is one client of the register: --tls-ca (and
--tls-cert/--tls-key) and --token (a worker token) as for any command.
Downstream it serves the binary protocol only, over TLS with
--listen-tls-cert/--listen-tls-key, requiring worker tokens with
--token-file. On a non-loopback --listen it refuses to start without TLS
and tokens unless --insecure.

SIGINT/SIGTERM stop it: the workers' connections close and their calls
go to their next server. SIGHUP re-reads --token-file.

Exit status: 0 stopped by a signal; 1 failed (the port in use); 2 usage error.
`

func runRelay(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("relay", `relay --servers HTTPADDR,... [--listen HOST:PORT] [--upstream leader|spread] [--max-inflight N]
                      [--listen-tls-cert FILE --listen-tls-key FILE] [--token-file FILE]
                      [--tls-ca FILE] [--token SECRET] [--metrics-addr HOST:PORT] [--config FILE]`, relayDescription, stdout, stderr)
	var f relayFlags
	f.define(c)
	if ok, code := c.parseSettings(args, &f.config, os.Environ(), stderr); !ok {
		return code
	}
	if err := f.check(); err != nil {
		return c.usageError(err.Error())
	}
	sec, err := f.security()
	if err != nil {
		return c.usageError(err.Error())
	}
	logger := newLogger("permitd-relay", f.logLevel, f.logFormat, stderr)
	opts := append([]client.Option{client.WithLogger(logger.Named("client")), client.WithAttemptTimeout(f.attemptTimeout), client.WithBinaryLeases()}, sec.clientOpts...)
	servers := spreadServers(f.servers, f.listen)
	cl, err := newClient(servers, opts...)
	if err != nil {
		return c.usageError(err.Error())
	}
	if f.validate {
		cl.Close()
		c.printSettings(stdout)
		return exitOK
	}
	if cl, servers, err = f.upstreamFirst(cl, servers, opts); err != nil {
		return c.usageError(err.Error())
	}
	defer cl.Close()
	r, err := relay.New(relay.Config{Upstream: cl, TLS: sec.serve, Tokens: sec.tokens, MaxInFlight: f.maxInFlight, Logger: logger})
	if err != nil {
		return c.usageError(err.Error())
	}
	p := relayProcess{f: &f, r: r, sec: sec, servers: servers, logger: logger, fails: failureReporter{stderr, logger, f.logFormat, "relay"}}
	return p.run()
}

// check rejects the settings that cannot work together: no --servers,
// half of the TLS pair, and an exposed relay without TLS and tokens, or
// exposed metrics, unless --insecure.
func (f *relayFlags) check() error {
	if f.servers == "" {
		return errors.New("--servers is required")
	}
	if (f.listenTLSCert == "") != (f.listenTLSKey == "") {
		return fmt.Errorf("--listen-tls-cert and --listen-tls-key go together (got cert %q, key %q)", f.listenTLSCert, f.listenTLSKey)
	}
	if !f.insecure && !isLoopback(f.listen) && (f.listenTLSCert == "" || f.tokenFile == "") {
		return fmt.Errorf("--listen %s is not a loopback address and the relay has no TLS or no tokens: anyone who reaches it could renew the fleet's leases; give --listen-tls-cert, --listen-tls-key and --token-file, or --insecure to expose it anyway", f.listen)
	}
	if !f.insecure && f.metricsAddr != "" && !isLoopback(f.metricsAddr) {
		return fmt.Errorf("--metrics-addr %s is not a loopback address; use one, or add --insecure", f.metricsAddr)
	}
	return nil
}

// relaySecurity is the relay's loaded security: the options of its
// client of the register, the TLS configuration it serves the workers
// with and the tokens it requires of them (nil without).
type relaySecurity struct {
	clientOpts []client.Option
	serve      *tls.Config
	tokens     *auth.TokenStore
}

// security loads the relay's TLS material and tokens. A relay that
// reaches the register over TLS must serve TLS too: its workers talk TLS
// to all their servers or to none.
func (f *relayFlags) security() (relaySecurity, error) {
	var sec relaySecurity
	var err error
	if sec.clientOpts, err = f.tls.options(); err != nil {
		return sec, err
	}
	if f.tls.ca != "" && f.listenTLSCert == "" {
		return sec, errors.New("--tls-ca makes the relay reach the register over TLS, so its workers talk TLS to all their servers, the relay included: give --listen-tls-cert and --listen-tls-key")
	}
	if f.listenTLSCert != "" {
		if sec.serve, err = tlsfiles.Server(f.listenTLSCert, f.listenTLSKey, "", false); err != nil {
			return sec, err
		}
	}
	if f.tokenFile != "" {
		ts, err := loadTokens(f.tokenFile)
		if err != nil {
			return sec, err
		}
		sec.tokens = auth.NewTokenStore(ts)
	}
	return sec, nil
}

// upstreamFirst returns the client cl of servers, or a new one of
// servers reordered as --upstream says: the leader first, or (spread)
// past it; and the servers in that order.
func (f *relayFlags) upstreamFirst(cl *client.Client, servers string, opts []client.Option) (*client.Client, string, error) {
	order := pastTheLeader
	if f.upstream == "leader" {
		order = leaderFirst
	}
	first := order(cl, servers)
	if first == servers {
		return cl, servers, nil
	}
	cl.Close()
	cl, err := newClient(first, opts...)
	return cl, first, err
}

// relayProcess is a relay command running: its settings, the relay, its
// security, the register's servers in the order it uses them, the logger
// and how it reports failures.
type relayProcess struct {
	f       *relayFlags
	r       *relay.Relay
	sec     relaySecurity
	servers string
	logger  hclog.Logger
	fails   failureReporter
}

// run serves the workers (and the metrics with --metrics-addr) until a
// signal stops it or serving fails; it returns the command's exit status.
func (p *relayProcess) run() int {
	f := p.f
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		p.fails.report("listen on --listen "+f.listen, err)
		return exitFailure
	}
	serveErr := make(chan error, 2)
	go func() { serveErr <- p.r.Serve(ln) }()
	metrics, err := p.serveMetrics(serveErr)
	if err != nil {
		p.r.Close()
		p.fails.report("listen on --metrics-addr "+f.metricsAddr, err)
		return exitFailure
	}
	p.logger.Info("relaying", "listen", ln.Addr().String(), "servers", p.servers, "tls", p.sec.serve != nil, "tokens", p.sec.tokens != nil,
		"upstream_tls", f.tls.ca != "", "max_inflight", f.maxInFlight, "version", readBuildInfo().Version)

	code := exitOK
	reload := func() { reloadTokenFile(p.sec.tokens, f.tokenFile, "--token-file", p.logger) }
	if _, err := waitForStop(p.logger, reload, serveErr); err != nil {
		p.fails.report("serve", err)
		code = exitFailure
	}
	p.r.Close()
	if metrics != nil {
		metrics.Close()
	}
	st := p.r.Stats()
	p.logger.Info("stopped", "commands", st.Commands, "batches", st.Batches, "batched_commands", st.BatchedCommands,
		"failed_batches", st.FailedBatches, "refused", st.Refused)
	return code
}

// serveMetrics serves the metrics on --metrics-addr (nil without it): the
// relay's counters, the Go runtime and the process. A failure to serve
// arrives on serveErr.
func (p *relayProcess) serveMetrics(serveErr chan<- error) (*http.Server, error) {
	if p.f.metricsAddr == "" {
		return nil, nil
	}
	mln, err := net.Listen("tcp", p.f.metricsAddr)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	registerProcessMetrics(reg)
	registerRelayMetrics(reg, p.r)
	metrics := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := metrics.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr <- fmt.Errorf("metrics: %w", err)
		}
	}()
	return metrics, nil
}

// registerRelayMetrics exports r's counters.
func registerRelayMetrics(reg prometheus.Registerer, r *relay.Relay) {
	counter := func(name, help string, v func(relay.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v(r.Stats())) })
	}
	gauge := func(name, help string, v func(relay.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(r.Stats()) })
	}
	reg.MustRegister(
		counter("permitd_relay_commands_total", "Lease commands received from workers and queued for the register.", func(s relay.Stats) uint64 { return s.Commands }),
		counter("permitd_relay_batches_total", "Batch calls sent to the register.", func(s relay.Stats) uint64 { return s.Batches }),
		counter("permitd_relay_batched_commands_total", "Lease commands carried by the batch calls.", func(s relay.Stats) uint64 { return s.BatchedCommands }),
		counter("permitd_relay_failed_batches_total", "Batches the register did not answer (their commands answered no leader).", func(s relay.Stats) uint64 { return s.FailedBatches }),
		counter("permitd_relay_refused_total", "Commands the relay answered itself: invalid, unauthenticated, forbidden or shed.", func(s relay.Stats) uint64 { return s.Refused }),
		gauge("permitd_relay_connections", "Workers' connections open now.", func(s relay.Stats) float64 { return float64(s.Conns) }),
		gauge("permitd_relay_queued_commands", "Commands waiting for a batch now.", func(s relay.Stats) float64 { return float64(s.Queued) }),
	)
}

// leaderFirst returns servers rotated to start at the register's leader
// (the first whose GET /v1/status says so), or as they are when none can
// be read as the leader. After a change of leader the relay's batches go
// to the node that answers, which forwards them.
func leaderFirst(cl *client.Client, servers string) string {
	list := splitList(servers)
	if len(list) < 2 {
		return servers
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaderProbeTimeout)
	defer cancel()
	for k, s := range list {
		if st, err := cl.StatusOf(ctx, s); err == nil && st.State == "leader" {
			return strings.Join(slices.Concat(list[k:], list[:k]), ",")
		}
	}
	return servers
}

// relayFirst puts relay (a worker's --relay) before servers: the worker's
// lease commands go to it first and to the register's nodes when it
// cannot be reached or does not answer.
func relayFirst(relayAddr, servers string) string {
	if relayAddr == "" {
		return servers
	}
	return strings.Join(append([]string{relayAddr}, splitList(servers)...), ",")
}
