// Package mddoc reads the repository's Markdown documentation for the
// tests that keep it from rotting: the fenced code blocks (with the
// doctest marker that makes a shell block runnable), the relative links,
// the headings' anchors as GitHub renders them, and the inline code
// spans.
//
// The model is deliberately small: a Markdown file is lines; a fence is a
// line starting with three backticks; inside a fence nothing is a link or
// a heading. A doctest marker is an HTML comment, invisible on GitHub, on
// the line right before a fence:
//
//	<!-- doctest: NAME -->             run this block
//	<!-- doctest: NAME on=OTHER -->    run block OTHER first, in the same shell
//
// Names are unique across the repository. What running means is the
// caller's (cmd/permitd's doc tests run shell blocks with bash against
// the binary; the Python client's tests run Python blocks).
package mddoc
