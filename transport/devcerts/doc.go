// Package devcerts makes the certificates permitd's TLS needs, for
// development, tests and the README's walkthrough (`permitd certs
// create`, and tests that need TLS): a certificate authority, one certificate per register node
// and one per client.
//
// The model is CockroachDB's `cert` command and Consul's `tls cert
// create`: one CA (ECDSA P-256, self-signed, path length 0) signs every
// certificate; a node certificate serves and dials (server and client
// authentication, so that the same certificate secures the client API
// and the nodes' mutual-TLS Raft transport), its subject the node's ID,
// its subject alternative names the given hosts (IP addresses and DNS
// names); a client certificate authenticates a client (its subject the
// client's name). Keys are written with mode 0600, certificates with
// 0644, all in PEM. Files are created, never replaced, and a request can
// be run again: an existing CA in the output folder is reused to sign new
// certificates (adding a node later), an existing file that fits the
// request (signed by that CA, covering every host, not expired, its key
// the certificate's) is kept, and one that does not fit is an error naming
// it before anything is written. Production deployments bring their own
// PKI; nothing here rotates or revokes.
package devcerts
