// Package httplite is a minimal HTTP/1.1 keep-alive client for load
// generators: one connection, one request at a time, requests written by hand
// and responses parsed just enough to get the status code and body. It costs
// a fraction of net/http's client per request, so that on a small machine
// the load generator does not eat the CPU the measured servers need. It is
// not a general HTTP client: it speaks only to servers that answer with a
// Content-Length (permitd does), and treats anything unexpected as an error
// that closes the connection.
package httplite
