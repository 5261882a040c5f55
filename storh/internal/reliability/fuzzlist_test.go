package reliability

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFuzzTargetsListed keeps .ci/fuzz-targets.txt honest: every fuzz
// target in the module is listed (so CI runs it), and every listed target
// exists in the package named.
func TestFuzzTargetsListed(t *testing.T) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Skipf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	f, err := os.Open(filepath.Join(root, ".ci", "fuzz-targets.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 || !strings.HasPrefix(fields[0], "./") {
			t.Errorf("malformed line %q: want \"./<package dir> <FuzzName>\"", line)
			continue
		}
		listed[filepath.Clean(fields[0])+" "+fields[1]] = true
	}
	found := map[string]bool{}
	re := regexp.MustCompile(`(?m)^func (Fuzz\w*)\(\w+ \*testing\.F\)`)
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			// Nested modules (bench) and hidden dirs are not this module's.
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || fileExists(filepath.Join(path, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range re.FindAllSubmatch(b, -1) {
			found[filepath.Clean(rel)+" "+string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k := range found {
		if !listed[k] {
			t.Errorf("fuzz target %s is not in .ci/fuzz-targets.txt", k)
		}
	}
	for k := range listed {
		if !found[k] {
			t.Errorf(".ci/fuzz-targets.txt lists %s, which does not exist", k)
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
