// Package secure makes and holds a secure run's credentials (Config.Secure
// of package runner): a CA and node certificates from `permitd certs
// create`, API tokens from `permitd tokens create` and the agents' token
// file. Everything the runner starts or sends then uses them: the agents'
// TLS and token flags, the Go client's TLS configuration and admin token,
// the HTTPS and bearer token of the raw HTTP requests (package httpjson),
// and the worker sidecars' CA and worker token.
//
// A nil *Creds is a plain run: its methods return nothing to add, so that
// every caller keeps its plain behaviour unchanged.
package secure
