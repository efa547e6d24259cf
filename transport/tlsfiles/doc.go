// Package tlsfiles turns the PEM files an operator names on the command
// line (--tls-cert, --tls-key, --tls-ca) into crypto/tls configurations:
// one for a server that may require client certificates, one for a client
// that verifies the server against a CA and may present its own
// certificate. It reads files and nothing else; it holds no state.
//
// Both sides speak TLS 1.3 only: every peer is a permitd binary or client
// of this repository, so there is no older peer to negotiate with.
package tlsfiles
