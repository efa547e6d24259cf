package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// maxLineBytes bounds one history line.
const maxLineBytes = 1 << 20

// Read parses a JSON-lines history and validates it (see Validate). Blank
// lines are skipped; unknown fields are an error.
func Read(r io.Reader) ([]Op, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var ops []Op
	v := newValidator()
	for line := 1; ; line++ {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			b, err = readLong(br, b)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("history: line %d: %w", line, err)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			op, perr := parseLine(t)
			if perr != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrInvalid, line, perr)
			}
			if verr := v.add(op); verr != nil {
				return nil, fmt.Errorf("line %d: %w", line, verr)
			}
			ops = append(ops, op)
		}
		if errors.Is(err, io.EOF) {
			return ops, nil
		}
	}
}

// readLong finishes a line longer than the reader's buffer, up to
// maxLineBytes.
func readLong(br *bufio.Reader, first []byte) ([]byte, error) {
	buf := append([]byte(nil), first...)
	for {
		b, err := br.ReadSlice('\n')
		buf = append(buf, b...)
		if len(buf) > maxLineBytes {
			return nil, fmt.Errorf("line longer than %d bytes", maxLineBytes)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, err
		}
	}
}

func parseLine(b []byte) (Op, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var op Op
	if err := dec.Decode(&op); err != nil {
		return Op{}, err
	}
	if dec.More() {
		return Op{}, errors.New("trailing data after the JSON object; allowed: one object per line")
	}
	return op, nil
}

// ReadFile reads and validates the history in the file at path.
func ReadFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	return Read(f)
}

func sortByIndex(ops []Op) {
	slices.SortFunc(ops, func(a, b Op) int { return a.Index - b.Index })
}
