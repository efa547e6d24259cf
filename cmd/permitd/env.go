package main

// Environment variables for the flags every cluster client shares, as
// etcdctl (ETCDCTL_ENDPOINTS) and consul (CONSUL_HTTP_ADDR) have them:
// PERMITD_SERVERS for --servers, PERMITD_TLS_CA, PERMITD_TLS_CERT and
// PERMITD_TLS_KEY for --tls-ca, --tls-cert and --tls-key (the names and
// formats the Python client reads: "host:port,host:port,..."; the token is
// PERMITD_TOKEN, read by clientTLSFlags.secret).
//
// A flag given on the command line wins over its variable, which wins over
// the default; an empty variable counts as unset. A variable's value is
// checked as the flag's is, and a bad one is a usage error naming the
// variable. The long-running commands (agent, worker, relay) also read
// every other flag from PERMITD_<NAME> and a config file (config.go); the
// variables here apply to every command that has the flag.

import (
	"fmt"
	"os"
	"strings"
)

// envVarOf returns the environment variable of flag name: PERMITD_ and the
// name in upper case with "-" as "_" (--tls-ca: PERMITD_TLS_CA), the same
// mapping as the config layer's.
func envVarOf(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// fromEnv lets the environment set flags names of c (already defined) when
// the command line does not; --help names the variable.
func (c *cmdLine) fromEnv(names ...string) {
	if c.env == nil {
		c.env = map[string]string{}
	}
	for _, n := range names {
		c.env[n] = envVarOf(n)
	}
}

// applyEnv sets each flag of fromEnv that the command line left unset from
// its variable, if that is set and not empty; a value the flag rejects is
// an error naming the variable and the flag.
func (c *cmdLine) applyEnv() error {
	for _, name := range c.order {
		key, ok := c.env[name]
		if !ok || c.isSet(name) {
			continue
		}
		val, ok := os.LookupEnv(key)
		if !ok || strings.TrimSpace(val) == "" {
			continue
		}
		if err := c.fs.Set(name, val); err != nil {
			return fmt.Errorf("environment variable %s (for --%s): %w", key, name, err)
		}
		if c.envSet == nil {
			c.envSet = map[string]bool{}
		}
		c.envSet[name] = true
	}
	return nil
}

// envNote returns, for an error about the values of the flags, which of
// them the environment set (" (--tls-ca from $PERMITD_TLS_CA)"), or "":
// the user who gave no flag learns where the value came from.
func (c *cmdLine) envNote() string {
	var from []string
	for _, name := range c.order {
		if c.envSet[name] {
			from = append(from, fmt.Sprintf("--%s from $%s", name, c.env[name]))
		}
	}
	if len(from) == 0 {
		return ""
	}
	return " (" + strings.Join(from, ", ") + ")"
}
