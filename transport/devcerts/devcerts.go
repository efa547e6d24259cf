package devcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
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
	"slices"
	"strings"
	"time"
)

// ErrInvalid is returned for a request that names nothing valid to make.
var ErrInvalid = errors.New("devcerts: invalid request")

// ErrUnfit is returned when a file the request names exists but does
// not fit it (another CA's, a host missing, expired, unreadable, a key
// that is not its certificate's); the error is an *UnfitError.
var ErrUnfit = errors.New("devcerts: existing file does not fit the request")

// UnfitError says which existing file does not fit the request and why.
// Nothing was written.
type UnfitError struct {
	// Path is the file (Dir joined with its name).
	Path string
	// Problem says what is wrong with it.
	Problem string
	// Pair is the other file of its pair (the key of a certificate, the
	// certificate of a key), to delete with it; "" for none.
	Pair string
}

func (e *UnfitError) Error() string { return "devcerts: " + e.Explain("folder") }

// Explain says which file, what is wrong and the fix, naming the output
// folder as folder ("folder", or a flag such as "--out").
func (e *UnfitError) Explain(folder string) string {
	del := e.Path
	if e.Pair != "" {
		del += " and " + e.Pair
	}
	return fmt.Sprintf("%s %s: delete %s to have it made again, or choose another %s (nothing was written)", e.Path, e.Problem, del, folder)
}

// Unwrap makes errors.Is(err, ErrUnfit) true.
func (e *UnfitError) Unwrap() error { return ErrUnfit }

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

// Result says what Create wrote and what it kept.
type Result struct {
	// ReusedCA is true when the CA was read from Dir, not made.
	ReusedCA bool
	// Kept are the files that existed and fit the request, in order,
	// relative to Dir (ca.crt and ca.key first when the CA was reused).
	Kept []string
	// Written are the files written, in order, relative to Dir.
	Written []string
}

// Create makes what r asks in r.Dir (created with its parents, mode
// 0700). It is idempotent: a file that exists and fits the request is
// kept (an existing CA is reused; a node's pair that this CA signed, for
// server and client authentication, covering every host of r, valid at
// r.Now, its key the certificate's; a client's likewise, for client
// authentication), and only what is missing is made. A file that exists
// and does not fit is an *UnfitError (ErrUnfit) and nothing is written.
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
	newCA := false
	switch {
	case err == nil:
		if !r.Now.Before(ca.cert.NotAfter) {
			return Result{}, fmt.Errorf("devcerts: the CA in %s expired at %s: remove %s and %s (and the certificates it signed) to make a new one",
				r.Dir, ca.cert.NotAfter.UTC().Format(time.RFC3339), CACert, CAKey)
		}
		out.ReusedCA = true
		out.Kept = append(out.Kept, CACert, CAKey)
	case errors.Is(err, errNoCA):
		newCA = true
		if ca, err = makeCA(r.Now, r.Validity); err != nil {
			return Result{}, err
		}
		files = append(files, file{CACert, ca.certPEM, false}, file{CAKey, ca.keyPEM, true})
	default:
		return Result{}, err
	}
	nodeUsages := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	clientUsages := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	var pairs []pair
	for _, id := range r.Nodes {
		c, k := NodeFiles(id)
		pairs = append(pairs, pair{id, c, k, nodeUsages, r.Hosts})
	}
	for _, name := range r.Clients {
		c, k := ClientFiles(name)
		pairs = append(pairs, pair{name, c, k, clientUsages, nil})
	}
	for _, p := range pairs {
		kept, err := p.check(r.Dir, ca, newCA, r.Now)
		if err != nil {
			return Result{}, err
		}
		if kept {
			out.Kept = append(out.Kept, p.cert, p.key)
			continue
		}
		var dns []string
		var ips []net.IP
		for _, h := range p.hosts {
			if ip := net.ParseIP(h); ip != nil {
				ips = append(ips, ip)
			} else {
				dns = append(dns, h)
			}
		}
		certPEM, keyPEM, err := ca.issue(r.Now, r.Validity, p.subject, dns, ips, p.usages)
		if err != nil {
			return Result{}, err
		}
		files = append(files, file{p.cert, certPEM, false}, file{p.key, keyPEM, true})
	}
	for _, f := range files {
		if err := f.write(r.Dir); err != nil {
			return out, err
		}
		out.Written = append(out.Written, f.name)
	}
	return out, nil
}

// pair is the certificate and key of one node or client.
type pair struct {
	subject   string
	cert, key string
	usages    []x509.ExtKeyUsage
	hosts     []string
}

// check reports whether p's files exist and fit (kept), or are both
// missing (to make); any other case is an *UnfitError naming the file.
// ca is the folder's CA; fresh says it is about to be made, so that no
// existing certificate can be its.
func (p pair) check(dir string, ca *authority, fresh bool, now time.Time) (kept bool, err error) {
	certPath, keyPath := filepath.Join(dir, p.cert), filepath.Join(dir, p.key)
	certPEM, keyPEM, leaf, err := readPair(certPath, keyPath, "")
	if errors.Is(err, errNoPair) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	unfit := func(path, other, format string, args ...any) (bool, error) {
		return false, &UnfitError{Path: path, Problem: fmt.Sprintf(format, args...), Pair: other}
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return unfit(keyPath, certPath, "is not the key of %s (%v)", p.cert, err)
	}
	if fresh {
		return unfit(certPath, keyPath, "was signed by a CA that is not in the folder (no %s and %s: a new CA is about to be made)", CACert, CAKey)
	}
	if err := leaf.CheckSignatureFrom(ca.cert); err != nil {
		return unfit(certPath, keyPath, "was not signed by the CA in the folder (%s)", CACert)
	}
	if now.After(leaf.NotAfter) {
		return unfit(certPath, keyPath, "expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return unfit(certPath, keyPath, "is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	for _, u := range p.usages {
		if !slices.Contains(leaf.ExtKeyUsage, u) {
			return unfit(certPath, keyPath, "lacks the %s usage", usageName(u))
		}
	}
	for _, h := range p.hosts {
		if err := leaf.VerifyHostname(h); err != nil {
			return unfit(certPath, keyPath, "does not cover host %s (it covers %s)", h, covered(leaf))
		}
	}
	return true, nil
}

// usageName names an extended key usage of this package.
func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "server authentication"
	}
	return "client authentication"
}

// covered lists the hosts a certificate names.
func covered(c *x509.Certificate) string {
	var hosts []string
	for _, ip := range c.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	hosts = append(hosts, c.DNSNames...)
	if len(hosts) == 0 {
		return "none"
	}
	return strings.Join(hosts, ",")
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

// makeCA makes a self-signed CA valid from an hour before now for validity.
func makeCA(now time.Time, validity time.Duration) (*authority, error) {
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

// errNoPair says that neither file of a pair is in the folder.
var errNoPair = errors.New("devcerts: neither file of the pair exists")

// readPair reads a certificate and its key and parses the certificate:
// errNoPair if neither file exists, an *UnfitError if only one does,
// either cannot be read, or the certificate is not one. what prefixes
// the certificate's problems ("(the CA) ").
func readPair(certPath, keyPath, what string) (certPEM, keyPEM []byte, leaf *x509.Certificate, err error) {
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	certMissing, keyMissing := errors.Is(certErr, os.ErrNotExist), errors.Is(keyErr, os.ErrNotExist)
	unfit := func(path, other, format string, args ...any) ([]byte, []byte, *x509.Certificate, error) {
		return nil, nil, nil, &UnfitError{Path: path, Problem: what + fmt.Sprintf(format, args...), Pair: other}
	}
	switch {
	case certMissing && keyMissing:
		if _, err := os.Lstat(certPath); err == nil { // a dangling link
			return unfit(certPath, "", "cannot be read: %v", certErr)
		}
		return nil, nil, nil, errNoPair
	case certErr != nil && !certMissing:
		return unfit(certPath, keyPath, "cannot be read: %v", certErr)
	case keyErr != nil && !keyMissing:
		return unfit(keyPath, certPath, "cannot be read: %v", keyErr)
	case keyMissing:
		return unfit(certPath, "", "has no %s beside it", filepath.Base(keyPath))
	case certMissing:
		return unfit(keyPath, "", "has no %s beside it", filepath.Base(certPath))
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return unfit(certPath, keyPath, "is not a PEM certificate")
	}
	leaf, err = x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return unfit(certPath, keyPath, "is not a certificate: %v", err)
	}
	return certPEM, keyPEM, leaf, nil
}

// errNoCA says that neither file of a CA is in the folder.
var errNoCA = errors.New("devcerts: no CA in the folder")

// loadCA reads the CA pair from dir (errNoCA if neither file is there;
// an *UnfitError if only one is, either cannot be read, or they are not
// a CA certificate and its key).
func loadCA(dir string) (*authority, error) {
	certPath, keyPath := filepath.Join(dir, CACert), filepath.Join(dir, CAKey)
	certPEM, keyPEM, cert, err := readPair(certPath, keyPath, "(the CA) ")
	if errors.Is(err, errNoPair) {
		return nil, errNoCA
	}
	if err != nil {
		return nil, err
	}
	unfit := func(path, other, format string, args ...any) (*authority, error) {
		return nil, &UnfitError{Path: path, Problem: fmt.Sprintf(format, args...), Pair: other}
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil || kb.Type != "EC PRIVATE KEY" {
		return unfit(keyPath, certPath, "is not a PEM EC private key (the kind this tool writes)")
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return unfit(keyPath, certPath, "is not an EC private key: %v", err)
	}
	if !cert.IsCA {
		return unfit(certPath, keyPath, "is not a CA certificate")
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return unfit(keyPath, certPath, "is not the key of %s", CACert)
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
