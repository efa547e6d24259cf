package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// modulePath is permitd's Go module path.
const modulePath = "github.com/permitd/permitd"

// FindModuleRoot walks up from dir to the directory whose go.mod declares
// permitd's module.
func FindModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("runner: %w", err)
	}
	for range 64 {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if line := strings.TrimSpace(sc.Text()); line == "module "+modulePath {
					f.Close()
					return dir, nil
				}
			}
			f.Close()
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", errors.New("runner: permitd's source tree (go.mod of " + modulePath + ") not found above the working directory; give --permitd-bin")
}

// BuildPermitd builds ./cmd/permitd of the module at root into dst.
func BuildPermitd(ctx context.Context, root, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dst, "./cmd/permitd")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("runner: go build -o %s ./cmd/permitd in %s: %w\n%s", dst, root, err, out)
	}
	return nil
}
