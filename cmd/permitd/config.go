package main

// Settings of the long-running commands (agent, worker, relay) from a config file
// and the environment.
//
// Every flag of the command can also be set
//
//   - in a JSON config file (--config FILE, or PERMITD_CONFIG=FILE): one
//     object whose keys are the flag names, with JSON types: strings for
//     strings and durations ("500ms"), numbers for numbers, true/false for
//     booleans, and a string or an array of strings for lists
//     ("initial-cluster": ["n1=10.0.0.1:7001", "n2=10.0.0.2:7001"]);
//   - in an environment variable PERMITD_<NAME>, the flag name in upper
//     case with "-" as "_" (--data-dir: PERMITD_DATA_DIR), in the flag's
//     own syntax.
//
// A flag on the command line wins over the environment, which wins over
// the file, which wins over the default. Everything is validated before
// the command starts: an unknown key, a value of the wrong JSON type, a
// duplicate key or a value the flag rejects is a one-line error naming
// the file, line and key (or the variable), and exit status 2. A
// PERMITD_* variable that names no flag of the command draws a warning,
// not an error: a shell may export settings for both the agent and the
// worker.
//
// JSON and not TOML or YAML: no new dependency, and its types make a
// wrong type an error rather than a guess.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// envPrefix starts the environment variables of settings.
const envPrefix = "PERMITD_"

// configOnlyOnCommandLine are flags that neither a file nor the
// environment may set (PERMITD_CONFIG names the file itself).
var configOnlyOnCommandLine = map[string]bool{"config": true, "validate": true}

// configEntry is one key of a config file.
type configEntry struct {
	key  string
	raw  json.RawMessage
	line int
}

// loadSettings sets the flags of c that the command line did not set,
// from the environment (environ, as os.Environ) and then from the config
// file (configPath, or $PERMITD_CONFIG; none if both are empty). It
// returns warnings for PERMITD_* variables that name no flag.
// parseSettings parses args, then loads the settings of the config file
// *configPath names (set by --config, else $PERMITD_CONFIG) and of
// environ, printing their warnings to stderr: ok, or a usage error's
// exit code.
func (c *cmdLine) parseSettings(args []string, configPath *string, environ []string, stderr io.Writer) (ok bool, code int) {
	if ok, code := c.parse(args); !ok {
		return false, code
	}
	warnings, err := c.loadSettings(*configPath, environ)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "permitd %s: warning: %s\n", c.name, w)
	}
	if err != nil {
		return false, c.usageError(err.Error())
	}
	return true, 0
}

// clientEnvSettings are the settings the client commands read from the
// environment (env.go): a shell that talks to a cluster exports them, so a
// command without them (agent) passes them over without a warning.
var clientEnvSettings = map[string]bool{"servers": true, "token": true, "tls-ca": true, "tls-cert": true, "tls-key": true}

func (c *cmdLine) loadSettings(configPath string, environ []string) (warnings []string, err error) {
	explicit := map[string]bool{}
	for _, name := range c.order {
		if c.isSet(name) {
			explicit[name] = true
		}
	}
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, envPrefix) {
			env[k] = v
		}
	}
	if configPath == "" {
		configPath = env[envPrefix+"CONFIG"]
	}
	// The file first, then the environment over it; the command line
	// was parsed already and is never overridden.
	if configPath != "" {
		entries, err := readConfigFile(configPath)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if err := c.setFromFile(e, explicit); err != nil {
				return nil, fmt.Errorf("config %s:%d: key %q: %w", configPath, e.line, e.key, err)
			}
		}
	}
	var names []string
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if k == envPrefix+"CONFIG" {
			continue
		}
		name := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, envPrefix)), "_", "-")
		if configOnlyOnCommandLine[name] {
			warnings = append(warnings, fmt.Sprintf("ignoring %s: --%s can be given only on the command line", k, name))
			continue
		}
		if _, ok := c.values[name]; !ok {
			if !clientEnvSettings[name] {
				warnings = append(warnings, fmt.Sprintf("ignoring %s: permitd %s has no setting --%s", k, c.name, name))
			}
			continue
		}
		if explicit[name] {
			continue
		}
		if err := c.fs.Set(name, env[k]); err != nil {
			return warnings, fmt.Errorf("environment variable %s: %w", k, err)
		}
		if c.envSources == nil {
			c.envSources = map[string]string{}
		}
		c.envSources[name] = k
	}
	return warnings, nil
}

// setFromFile checks e against its flag's type and sets the flag unless
// the command line did.
func (c *cmdLine) setFromFile(e configEntry, explicit map[string]bool) error {
	v, ok := c.values[e.key]
	if !ok || configOnlyOnCommandLine[e.key] {
		if configOnlyOnCommandLine[e.key] {
			return fmt.Errorf("--%s can be given only on the command line", e.key)
		}
		hint := ""
		if best := closest(e.key, c.settingNames()); best != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", best)
		}
		return fmt.Errorf("unknown key%s; keys are the flag names of permitd %s", hint, c.name)
	}
	text, err := jsonToFlagText(v.kind, e.raw)
	if err != nil {
		return err
	}
	if explicit[e.key] {
		return nil
	}
	return c.fs.Set(e.key, text)
}

// settingNames are the flags a file or the environment may set.
func (c *cmdLine) settingNames() []string {
	var out []string
	for _, n := range c.order {
		if !configOnlyOnCommandLine[n] {
			out = append(out, n)
		}
	}
	return out
}

// jsonToFlagText checks a JSON value's type against kind and returns it in
// the flag's syntax.
func jsonToFlagText(kind valueKind, raw json.RawMessage) (string, error) {
	want := map[valueKind]string{
		kindString: "a string", kindList: "a string or an array of strings", kindBool: "true or false",
		kindInt: "an integer", kindFloat: "a number", kindDuration: `a duration string such as "500ms" or "2s"`,
	}[kind]
	var got any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&got); err != nil {
		return "", fmt.Errorf("invalid JSON value: %w", err)
	}
	switch x := got.(type) {
	case string:
		if kind == kindString || kind == kindList || kind == kindDuration {
			return x, nil
		}
	case json.Number:
		if kind == kindInt || kind == kindFloat {
			return x.String(), nil
		}
		if kind == kindDuration {
			return "", fmt.Errorf("want %s, got the number %s (a duration needs a unit, as in \"%ss\")", want, x, x)
		}
	case bool:
		if kind == kindBool {
			return fmt.Sprint(x), nil
		}
	case []any:
		if kind == kindList {
			items := make([]string, len(x))
			for i, it := range x {
				s, ok := it.(string)
				if !ok {
					return "", fmt.Errorf("want %s, got an array with %s", want, describeJSON(it))
				}
				if strings.Contains(s, ",") {
					return "", fmt.Errorf("array item %q contains a comma; give one item per string", s)
				}
				items[i] = s
			}
			return strings.Join(items, ","), nil
		}
	}
	return "", fmt.Errorf("want %s, got %s", want, describeJSON(got))
}

// describeJSON names a decoded JSON value for messages.
func describeJSON(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", x)
	case json.Number:
		return "the number " + x.String()
	case bool:
		return fmt.Sprintf("%v", x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%v", v)
}

// readConfigFile reads a config file: one JSON object, keys unique.
func readConfigFile(path string) ([]configEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	entries, err := parseConfig(data)
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("config %s:%d: invalid JSON: %w", path, lineAt(data, int(se.Offset)), err)
		}
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return entries, nil
}

// parseConfig parses a config file's text.
func parseConfig(data []byte) ([]configEntry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, errors.New("the file is empty; want a JSON object of settings such as {\"id\": \"n1\"}")
	}
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("want a JSON object of settings such as {\"id\": \"n1\"}")
	}
	var out []configEntry
	lines := map[string]int{}
	for dec.More() {
		off := int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string) // object keys are strings, or Token fails
		line := lineAt(data, off)
		if first, dup := lines[key]; dup {
			return nil, fmt.Errorf("line %d: key %q given twice (first on line %d)", line, key, first)
		}
		lines[key] = line
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		out = append(out, configEntry{key: key, raw: raw, line: line})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("line %d: text after the settings object", lineAt(data, int(dec.InputOffset())))
	}
	return out, nil
}

// lineAt is the 1-based line of the first character at or after offset
// that is not white space or JSON punctuation between values.
func lineAt(data []byte, offset int) int {
	offset = min(max(offset, 0), len(data))
	for offset < len(data) && strings.IndexByte(" \t\r\n,:", data[offset]) >= 0 {
		offset++
	}
	return 1 + bytes.Count(data[:offset], []byte("\n"))
}

// secretSettings are the settings printSettings never prints.
var secretSettings = map[string]bool{"token": true}

// printSettings writes the effective settings as a config file (the
// output of --validate): every setting, in definition order, secrets
// redacted.
func (c *cmdLine) printSettings(w io.Writer) {
	var b strings.Builder
	b.WriteString("{\n")
	names := c.settingNames()
	for i, n := range names {
		v := c.values[n]
		var js []byte
		switch {
		case secretSettings[n] && v.String() != "":
			js = []byte(`"<redacted>"`) // never print a secret
		case v.kind == kindBool || v.kind == kindInt || v.kind == kindFloat:
			js = []byte(v.String())
		default:
			js, _ = json.Marshal(v.String())
		}
		fmt.Fprintf(&b, "  %q: %s", n, js)
		if i < len(names)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	io.WriteString(w, b.String())
}
