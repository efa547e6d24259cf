package devcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// ErrInvalid is returned for a request that names nothing valid to make.
var ErrInvalid = errors.New("devcerts: invalid request")

// ErrExists is returned when a file to write already exists.
var ErrExists = errors.New("devcerts: file exists")

// Request says which certificates to make.
type Request struct {
	// Dir is the output folder (created with mode 0700 if missing).
	Dir string
	// Nodes are the register nodes' IDs: one certificate each.
	Nodes []string
	// Hosts are the addresses the nodes answer on (IP addresses or DNS
	// names), the subject alternative names of every node certificate.
	Hosts []string
	// Clients are the clients' names: one certificate each.
	Clients []string
	// Validity is how long the certificates are valid from now.
	Validity time.Duration
	// Now is the current time (the certificates are valid from an hour
	// before it, for clocks that lag).
	Now time.Time
}

// Files of the CA, and the names of a node's and a client's files.
const (
	CACert = "ca.crt"
	CAKey  = "ca.key"
)

// NodeFiles returns the certificate and key file names of node id.
func NodeFiles(id string) (cert, key string) { return "node-" + id + ".crt", "node-" + id + ".key" }

// ClientFiles returns the certificate and key file names of client name.
func ClientFiles(name string) (cert, key string) {
	return "client-" + name + ".crt", "client-" + name + ".key"
}

// MaxValidity is the longest validity a request may ask.
const MaxValidity = 10 * 365 * 24 * time.Hour

// namePattern is what a node ID or client name may be: it becomes part of
// a file name.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// Validate checks r: at least one node or client, names that fit a file
// name and are unique, hosts when there are nodes, a validity within
// (0, MaxValidity].
func (r Request) Validate() error {
	if r.Dir == "" {
		return fmt.Errorf("%w: no output folder", ErrInvalid)
	}
	if len(r.Nodes) == 0 && len(r.Clients) == 0 {
		return fmt.Errorf("%w: no node and no client: name at least one", ErrInvalid)
	}
	if len(r.Nodes) > 0 && len(r.Hosts) == 0 {
		return fmt.Errorf("%w: node certificates need at least one host (an IP address or DNS name the nodes answer on)", ErrInvalid)
	}
	seen := map[string]bool{}
	for _, list := range []struct {
		what  string
		names []string
	}{{"node", r.Nodes}, {"client", r.Clients}} {
		for _, n := range list.names {
			if !namePattern.MatchString(n) {
				return fmt.Errorf("%w: %s name %q: allowed: 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrInvalid, list.what, n)
			}
			if seen[list.what+"/"+n] {
				return fmt.Errorf("%w: %s name %q given twice", ErrInvalid, list.what, n)
			}
			seen[list.what+"/"+n] = true
		}
	}
	for _, h := range r.Hosts {
		if net.ParseIP(h) == nil && !dnsName.MatchString(h) {
			return fmt.Errorf("%w: host %q: allowed: an IP address or a DNS name", ErrInvalid, h)
		}
	}
	if r.Validity <= 0 || r.Validity > MaxValidity {
		return fmt.Errorf("%w: validity %v: allowed: more than 0, at most %v", ErrInvalid, r.Validity, MaxValidity)
	}
	return nil
}

// dnsName is a DNS name (labels of letters, digits and '-', a leading
// "*." allowed).
var dnsName = regexp.MustCompile(`^(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// Result says what Create wrote.
type Result struct {
	// ReusedCA is true when the CA was read from Dir, not made.
	ReusedCA bool
	// Written are the files written, in order, relative to Dir.
	Written []string
}

// Create makes what r asks in r.Dir. Nothing is written if any file it
// would write (other than an existing CA's pair, which is reused) exists.
func Create(r Request) (Result, error) {
	if err := r.Validate(); err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(r.Dir, 0o700); err != nil {
		return Result{}, fmt.Errorf("devcerts: output folder: %w", err)
	}
	var out Result
	var files []file
	ca, err := loadCA(r.Dir)
	switch {
	case err == nil:
		if !r.Now.Before(ca.cert.NotAfter) {
			return Result{}, fmt.Errorf("devcerts: the CA in %s expired at %s: remove %s and %s (and the certificates it signed) to make a new one",
				r.Dir, ca.cert.NotAfter.UTC().Format(time.RFC3339), CACert, CAKey)
		}
		out.ReusedCA = true
	case errors.Is(err, errNoCA):
		if ca, err = newCA(r.Now, r.Validity); err != nil {
			return Result{}, err
		}
		files = append(files, file{CACert, ca.certPEM, false}, file{CAKey, ca.keyPEM, true})
	default:
		return Result{}, err
	}
	var ips []net.IP
	var dns []string
	for _, h := range r.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, h)
		}
	}
	for _, id := range r.Nodes {
		certPEM, keyPEM, err := ca.issue(r.Now, r.Validity, id, dns, ips, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
		if err != nil {
			return Result{}, err
		}
		c, k := NodeFiles(id)
		files = append(files, file{c, certPEM, false}, file{k, keyPEM, true})
	}
	for _, name := range r.Clients {
		certPEM, keyPEM, err := ca.issue(r.Now, r.Validity, name, nil, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
		if err != nil {
			return Result{}, err
		}
		c, k := ClientFiles(name)
		files = append(files, file{c, certPEM, false}, file{k, keyPEM, true})
	}
	for _, f := range files {
		if _, err := os.Lstat(filepath.Join(r.Dir, f.name)); err == nil {
			return Result{}, fmt.Errorf("%w: %s: remove it or choose another folder (nothing was written)", ErrExists, filepath.Join(r.Dir, f.name))
		}
	}
	for _, f := range files {
		if err := f.write(r.Dir); err != nil {
			return out, err
		}
		out.Written = append(out.Written, f.name)
	}
	return out, nil
}

// file is one file to write.
type file struct {
	name    string
	data    []byte
	private bool
}

// write creates f in dir (never replacing a file).
func (f file) write(dir string) error {
	mode := os.FileMode(0o644)
	if f.private {
		mode = 0o600
	}
	w, err := os.OpenFile(filepath.Join(dir, f.name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("devcerts: %w", err)
	}
	if _, err := w.Write(f.data); err != nil {
		w.Close()
		return fmt.Errorf("devcerts: write %s: %w", f.name, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("devcerts: write %s: %w", f.name, err)
	}
	return nil
}

// authority is a CA that signs.
type authority struct {
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
	certPEM, keyPEM []byte
}

// newCA makes a self-signed CA valid from an hour before now for validity.
func newCA(now time.Time, validity time.Duration) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("devcerts: CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "permitd development CA", Organization: []string{"permitd"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("devcerts: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("devcerts: CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM: keyPEM}, nil
}

// errNoCA says that neither file of a CA is in the folder.
var errNoCA = errors.New("devcerts: no CA in the folder")

// loadCA reads the CA pair from dir (errNoCA if neither file is there; an
// error if only one is, or they do not match).
func loadCA(dir string) (*authority, error) {
	certPEM, certErr := os.ReadFile(filepath.Join(dir, CACert))
	keyPEM, keyErr := os.ReadFile(filepath.Join(dir, CAKey))
	switch {
	case errors.Is(certErr, os.ErrNotExist) && errors.Is(keyErr, os.ErrNotExist):
		return nil, errNoCA
	case certErr != nil:
		return nil, fmt.Errorf("devcerts: existing CA: %w (%s needs %s next to it)", certErr, CAKey, CACert)
	case keyErr != nil:
		return nil, fmt.Errorf("devcerts: existing CA: %w (%s needs %s next to it)", keyErr, CACert, CAKey)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || cb.Type != "CERTIFICATE" || kb == nil || kb.Type != "EC PRIVATE KEY" {
		return nil, fmt.Errorf("devcerts: existing CA in %s: %s or %s is not a PEM certificate and EC key of this tool", dir, CACert, CAKey)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("devcerts: existing CA certificate: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("devcerts: existing CA key: %w", err)
	}
	if !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("devcerts: existing CA in %s: %s is not a CA certificate for %s", dir, CACert, CAKey)
	}
	return &authority{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// issue makes a certificate for subject signed by a, and its key.
func (a *authority) issue(now time.Time, validity time.Duration, subject string, dns []string, ips []net.IP, usages []x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("devcerts: key of %s: %w", subject, err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(a.cert.NotAfter) {
		notAfter = a.cert.NotAfter // never outlive the CA
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: subject, Organization: []string{"permitd"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("devcerts: certificate of %s: %w", subject, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// encodeKey is key in PEM ("EC PRIVATE KEY", SEC 1).
func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("devcerts: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// newSerial is a random 128-bit serial number.
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("devcerts: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil // never 0
}
