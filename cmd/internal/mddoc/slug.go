package mddoc

import (
	"strings"
	"unicode"
)

// Slug returns the anchor GitHub gives a heading: its text without
// Markdown emphasis and code marks, in lower case, with every character
// but letters, digits, spaces, '-' and '_' dropped and each space made a
// '-'. (A second heading with the same slug gets "-1", a third "-2":
// Parse numbers them.)
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(stripLinks(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// stripLinks replaces "[text](target)" in a heading by its text.
func stripLinks(s string) string {
	for {
		open := strings.Index(s, "](")
		if open < 0 {
			return s
		}
		end := strings.Index(s[open:], ")")
		start := strings.LastIndex(s[:open], "[")
		if end < 0 || start < 0 {
			return s
		}
		s = s[:start] + s[start+1:open] + s[open+end+1:]
	}
}
