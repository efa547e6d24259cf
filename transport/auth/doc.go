// Package auth holds the register's API tokens: the token file an agent
// reads (--token-file), the secrets `permitd tokens create` makes, and
// the Authorization header a request carries.
//
// The model is Consul's ACL tokens and etcd's RBAC, reduced to three
// roles: admin (limits, lease policy, cluster membership, snapshots),
// client (reserve and read limits, optionally only those whose names
// match a pattern) and worker (lease, renew, return). A token is a
// random secret ("pmt_" and 43 characters of unpadded base64url: 256
// bits); the file keeps only its SHA-256, never the secret, so a leaked
// file grants nothing. Looking a secret up hashes it and compares the
// hash with every entry in constant time, whichever entry matches or
// none.
//
// The token file is text, one token a line; blank lines and lines
// starting with '#' are ignored:
//
//	NAME ROLE sha256:HEX [limits=PATTERN,...]
//
// NAME identifies the token in logs and errors (1-63 letters, digits,
// '.', '_', '-'; unique in the file); ROLE is admin, client or worker;
// HEX the 64 lowercase hex digits of the secret's SHA-256 (unique in the
// file); limits= (client tokens only) restricts the token to the limits
// whose names match one of the patterns (path.Match syntax: '*', '?',
// '[...]'). A file that breaks any rule is rejected whole, with the line
// number and what is allowed, and the agent keeps the tokens it had.
//
// Servers keep the current tokens in a TokenStore (a reload swaps them at
// once) and wrap their HTTP handlers in Require, giving it the Need of
// each route: package transport/server for the register's API and binary
// protocol, package sidecar for a worker's. Allows is the one rule that
// maps a token's role and limits to a Need.
package auth
