package main

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelpTexts checks that every command a user can call, cobra's help and
// completion included, has a one-line summary, a Long text and an Example
// whose lines run storh (or set it up).
func TestHelpTexts(t *testing.T) {
	a := newApp(context.Background(), strings.NewReader(""), nil, nil, func(string) string { return "" })
	root := a.rootCmd()
	root.InitDefaultHelpCmd() // as Execute does; idempotent
	root.InitDefaultCompletionCmd()
	n := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		n++
		path := c.CommandPath()
		if c.Short == "" || strings.Contains(c.Short, "\n") {
			t.Errorf("%s: the short help must be one line: %q", path, c.Short)
		}
		if strings.TrimSpace(c.Long) == "" {
			t.Errorf("%s: no Long help text", path)
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s: no Example", path)
		}
		for _, line := range strings.Split(c.Example, "\n") {
			if !strings.HasPrefix(line, "  ") || !strings.Contains(line, "storh") {
				t.Errorf("%s: example line %q should be indented and run storh", path, line)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if n < 30 {
		t.Errorf("walked %d commands: the tree is not what this test expects", n)
	}
}
