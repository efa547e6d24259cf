package main

import "testing"

// TestParseConfigLines checks the lines reported for keys and what is not
// a config file.
func TestParseConfigLines(t *testing.T) {
	entries, err := parseConfig([]byte("{\n  \"a\": 1,\n\n  \"b\": [\"x\",\n \"y\"], \"c\": true\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, e := range entries {
		got += e.key + ":" + string(rune('0'+e.line)) + " "
	}
	if got != "a:2 b:4 c:5 " {
		t.Fatalf("entries %q", got)
	}
	for _, text := range []string{"", "[]", "{} {}", `{"a":1,"a":2}`, `{"a":}`, "{"} {
		if _, err := parseConfig([]byte(text)); err == nil {
			t.Errorf("%q: no error", text)
		}
	}
}
