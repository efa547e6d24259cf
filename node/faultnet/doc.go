// Package faultnet is an in-memory network for in-process permitd clusters,
// with partitions that tests switch on and off. Every host gets a Network
// (node.Network) bound to its own address; connections are net.Pipe pairs,
// so nothing leaves the process. A partition between two hosts refuses new
// dials between them and closes their open connections, which is what a
// real partition looks like to raft after its timeouts, only faster.
package faultnet
