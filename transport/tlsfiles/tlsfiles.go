package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrInvalid reports TLS files that cannot be used: missing, unreadable,
// not PEM, or a key that does not match its certificate.
var ErrInvalid = errors.New("tlsfiles: invalid TLS files")

// Pair loads a certificate and its private key (PEM files).
func Pair(certFile, keyFile string) (tls.Certificate, error) {
	if certFile == "" || keyFile == "" {
		return tls.Certificate{}, fmt.Errorf("%w: a certificate needs both files (cert %q, key %q)", ErrInvalid, certFile, keyFile)
	}
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: certificate %s with key %s: %v", ErrInvalid, certFile, keyFile, err)
	}
	return c, nil
}

// Roots loads a CA bundle (one or more PEM certificates).
func Roots(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: CA file: %v", ErrInvalid, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrInvalid, caFile)
	}
	return pool, nil
}

// Server returns the configuration of a TLS listener that presents
// certFile/keyFile. With requireClientCerts it accepts only clients whose
// certificate chains to caFile (client authentication); caFile may be
// empty otherwise.
func Server(certFile, keyFile, caFile string, requireClientCerts bool) (*tls.Config, error) {
	cert, err := Pair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}}
	if requireClientCerts {
		if caFile == "" {
			return nil, fmt.Errorf("%w: client certificates are required but no CA file is given to verify them", ErrInvalid)
		}
		roots, err := Roots(caFile)
		if err != nil {
			return nil, err
		}
		conf.ClientCAs, conf.ClientAuth = roots, tls.RequireAndVerifyClientCert
	}
	return conf, nil
}

// Client returns the configuration of a client that verifies servers
// against caFile (empty: the system's roots) and, when certFile and
// keyFile are given, presents that certificate.
func Client(caFile, certFile, keyFile string) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS13}
	if caFile != "" {
		roots, err := Roots(caFile)
		if err != nil {
			return nil, err
		}
		conf.RootCAs = roots
	}
	if certFile != "" || keyFile != "" {
		cert, err := Pair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}
