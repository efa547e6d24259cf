package mddoc

import (
	"regexp"
	"strings"
)

// Doc is one parsed Markdown file.
type Doc struct {
	// Path is the file's path relative to the repository root, with
	// slashes.
	Path string
	// Lines is the file's line count.
	Lines int
	// Blocks are its fenced code blocks, in order.
	Blocks []Block
	// Links are its links outside code, in order.
	Links []Link
	// Inline are its inline code spans outside fences, in order.
	Inline []Span
	// Anchors are the fragments that address a place in it: each
	// heading's GitHub slug, and each <a id=...> or <a name=...>.
	Anchors map[string]bool
}

// Block is one fenced code block.
type Block struct {
	// Line is the 1-based line of its opening fence.
	Line int
	// Lang is the fence's info string up to its first space ("sh").
	Lang string
	// Body is the text between the fences, each line ending in "\n".
	Body string
	// Doctest is its marker, or nil.
	Doctest *Marker
}

// Marker is a doctest marker: "<!-- doctest: NAME [on=OTHER] -->".
type Marker struct {
	// Name names the block, unique across the repository.
	Name string
	// On names the block to run first in the same shell, or is empty.
	On string
	// Err is what is wrong with the marker's syntax, or empty.
	Err string
}

// Link is one Markdown link "[text](target)" outside code.
type Link struct {
	// Line is its 1-based line.
	Line int
	// Target is what is between the parentheses.
	Target string
}

// Span is one inline code span.
type Span struct {
	// Line is its 1-based line.
	Line int
	// Text is the code between the backticks.
	Text string
}

var (
	markerRE = regexp.MustCompile(`^<!--\s*doctest:(.*?)-->\s*$`)
	linkRE   = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	anchorRE = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	codeRE   = regexp.MustCompile("(`+)(.+?)(`+)")
)

// Parse reads one Markdown file's text.
func Parse(path, text string) *Doc {
	d := &Doc{Path: path, Anchors: map[string]bool{}}
	lines := strings.Split(text, "\n")
	d.Lines = len(lines)
	if strings.HasSuffix(text, "\n") {
		d.Lines--
	}
	slugs := map[string]int{}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if fence, ok := fenceOpen(line); ok {
			b := Block{Line: i + 1, Lang: infoLang(strings.TrimPrefix(strings.TrimSpace(line), fence))}
			if i > 0 {
				b.Doctest = parseMarker(lines[i-1])
			}
			var body strings.Builder
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), fence); i++ {
				body.WriteString(lines[i] + "\n")
			}
			b.Body = body.String()
			d.Blocks = append(d.Blocks, b)
			continue
		}
		if h, ok := heading(line); ok {
			slug := Slug(h)
			if n := slugs[slug]; n > 0 {
				d.Anchors[slug+"-"+itoa(n)] = true
			} else {
				d.Anchors[slug] = true
			}
			slugs[slug]++
		}
		for _, m := range anchorRE.FindAllStringSubmatch(line, -1) {
			d.Anchors[m[1]] = true
		}
		prose := line
		for _, m := range codeRE.FindAllStringSubmatch(line, -1) {
			if len(m[1]) == len(m[3]) {
				d.Inline = append(d.Inline, Span{Line: i + 1, Text: strings.TrimSpace(m[2])})
			}
			prose = strings.Replace(prose, m[0], "", 1)
		}
		for _, m := range linkRE.FindAllStringSubmatch(prose, -1) {
			d.Links = append(d.Links, Link{Line: i + 1, Target: m[1]})
		}
	}
	return d
}

// fenceOpen reports whether line opens a fenced block, and its fence.
func fenceOpen(line string) (string, bool) {
	t := strings.TrimSpace(line)
	if !strings.HasPrefix(t, "```") {
		return "", false
	}
	n := len(t) - len(strings.TrimLeft(t, "`"))
	return t[:n], true
}

// infoLang returns an info string's language word.
func infoLang(info string) string {
	lang, _, _ := strings.Cut(strings.TrimSpace(info), " ")
	return lang
}

// heading returns an ATX heading's text.
func heading(line string) (string, bool) {
	t := strings.TrimLeft(line, "#")
	level := len(line) - len(t)
	if level == 0 || level > 6 || !strings.HasPrefix(t, " ") {
		return "", false
	}
	return strings.TrimSpace(strings.TrimRight(strings.TrimSpace(t), "#")), true
}

// parseMarker reads a doctest marker line, or returns nil.
func parseMarker(line string) *Marker {
	m := markerRE.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return nil
	}
	mk := &Marker{}
	for i, f := range strings.Fields(m[1]) {
		switch on, ok := strings.CutPrefix(f, "on="); {
		case i == 0 && !strings.Contains(f, "="):
			mk.Name = f
		case ok && on != "":
			mk.On = on
		default:
			mk.Err = "unexpected " + `"` + f + `"` + " (want <!-- doctest: NAME --> or <!-- doctest: NAME on=OTHER -->)"
		}
	}
	if mk.Name == "" && mk.Err == "" {
		mk.Err = "no name (want <!-- doctest: NAME -->)"
	}
	return mk
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
