package mddoc

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	text := "# permitd\n" +
		"See [the manual](fsm/README.md#linearized-decisions) and `permitd status --wait 10s`.\n" +
		"## Guarantees: *what* `holds`\n" +
		"<a id=\"custom\"></a>\n" +
		"<!-- doctest: cluster -->\n" +
		"```sh\n" +
		"./permitd agent [not a link](x.md)\n" +
		"# not a heading\n" +
		"```\n" +
		"## Guarantees: what holds\n" +
		"`[code](not-a-link.md)` [after code](b.md \"title\")\n" +
		"<!-- doctest: reserve on=cluster -->\n" +
		"```python title\n" +
		"print(1)\n" +
		"```\n"
	d := Parse("README.md", text)
	if d.Lines != 15 {
		t.Errorf("Lines = %d, want 15", d.Lines)
	}
	wantBlocks := []Block{
		{Line: 6, Lang: "sh", Body: "./permitd agent [not a link](x.md)\n# not a heading\n", Doctest: &Marker{Name: "cluster"}},
		{Line: 13, Lang: "python", Body: "print(1)\n", Doctest: &Marker{Name: "reserve", On: "cluster"}},
	}
	if !reflect.DeepEqual(d.Blocks, wantBlocks) {
		t.Errorf("Blocks = %+v\nwant %+v", d.Blocks, wantBlocks)
	}
	wantLinks := []Link{{Line: 2, Target: "fsm/README.md#linearized-decisions"}, {Line: 11, Target: "b.md"}}
	if !reflect.DeepEqual(d.Links, wantLinks) {
		t.Errorf("Links = %+v, want %+v", d.Links, wantLinks)
	}
	wantAnchors := map[string]bool{"permitd": true, "guarantees-what-holds": true, "guarantees-what-holds-1": true, "custom": true}
	if !reflect.DeepEqual(d.Anchors, wantAnchors) {
		t.Errorf("Anchors = %v, want %v", d.Anchors, wantAnchors)
	}
	wantInline := []Span{{Line: 2, Text: "permitd status --wait 10s"}, {Line: 3, Text: "holds"}, {Line: 11, Text: "[code](not-a-link.md)"}}
	if !reflect.DeepEqual(d.Inline, wantInline) {
		t.Errorf("Inline = %+v, want %+v", d.Inline, wantInline)
	}
}

func TestMarkerErrors(t *testing.T) {
	for line, want := range map[string]Marker{
		"<!-- doctest: a on=b -->": {Name: "a", On: "b"},
		"<!-- doctest: -->":        {Err: "no name (want <!-- doctest: NAME -->)"},
		"<!-- doctest: a after=b -->": {Name: "a",
			Err: `unexpected "after=b" (want <!-- doctest: NAME --> or <!-- doctest: NAME on=OTHER -->)`},
	} {
		got := parseMarker(line)
		if got == nil || *got != want {
			t.Errorf("parseMarker(%q) = %+v, want %+v", line, got, want)
		}
	}
	if parseMarker("<!-- a comment -->") != nil {
		t.Error("a plain comment is no marker")
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Running a cluster":                    "running-a-cluster",
		"Several limits, settlements, shadow":  "several-limits-settlements-shadow",
		"`permitd bench`: the load generator":  "permitd-bench-the-load-generator",
		"3b. Lease conservation — `checker.X`": "3b-lease-conservation--checkerx",
		"[Linked](x.md) heading":               "linked-heading",
		"snake_case and Ünïcode":               "snake_case-and-ünïcode",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
