package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestDocsCommandLines checks the storh command lines of README.md and
// docs/*.md against the command tree: in sh and console blocks, every
// command must exist and its flags parse (names and values) with a number
// of arguments the command accepts; in the prose, a `storh ...` span is a
// synopsis (COLL, [--id ID], a|b) whose commands and flags must exist.
// Nothing runs: a renamed command or flag fails here, not in a reader's
// shell.
func TestDocsCommandLines(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	lines, spans := 0, 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../../")
		for _, c := range docCommands(string(src)) {
			var err error
			if c.synopsis {
				spans++
				err = checkSynopsis(c.text)
			} else {
				lines++
				err = checkCommandLine(c.text)
			}
			if err != nil {
				t.Errorf("%s:%d: %s\n\t%v", name, c.line, c.text, err)
			}
		}
	}
	t.Logf("checked %d command lines and %d synopses", lines, spans)
	if lines < 100 || spans < 50 {
		t.Errorf("found %d command lines and %d synopses: the extraction no longer finds what the docs hold", lines, spans)
	}
}

// TestDocsCommandLinesCatch checks that the checks fail what they must.
func TestDocsCommandLinesCatch(t *testing.T) {
	for _, line := range []string{
		"storh qeury pages",
		"storh query pages --wher kind=page",
		"storh query pages --limit ten",
		"storh get pages",
		"storh queue bogus emails",
		"storh -x stats",
		"printf '{}' | storh put pages --nope",
		"echo $(storh uuid new --cnt 3)",
	} {
		if err := checkCommandLine(line); err == nil {
			t.Errorf("%s: passed", line)
		}
	}
	for _, span := range []string{
		"storh serve [--adr HOST:PORT]",
		"storh queue enqueue|claim|finish",
		"storh index lsit",
	} {
		if err := checkSynopsis(span); err == nil {
			t.Errorf("%s: passed", span)
		}
	}
}

type docCommand struct {
	line     int
	text     string
	synopsis bool
}

var storhSpan = regexp.MustCompile("`(storh [^`]*)`")

// docCommands returns the command lines of the sh and console blocks of a
// Markdown page (a console line is one that starts with "$ "; a trailing
// backslash continues it) and the `storh ...` spans of its prose.
func docCommands(src string) []docCommand {
	var out []docCommand
	lang, inBlock := "", false
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if fence := strings.TrimLeft(l, " \t"); strings.HasPrefix(fence, "```") {
			lang, inBlock = strings.TrimPrefix(fence, "```"), !inBlock
			continue
		}
		switch {
		case !inBlock:
			for _, m := range storhSpan.FindAllStringSubmatch(l, -1) {
				out = append(out, docCommand{i + 1, m[1], true})
			}
		case lang == "sh" || lang == "console" && strings.HasPrefix(strings.TrimSpace(l), "$ "):
			first := i
			text := strings.TrimPrefix(strings.TrimSpace(l), "$ ")
			for strings.HasSuffix(text, "\\") && i+1 < len(lines) {
				i++
				text = strings.TrimSuffix(text, "\\") + " " + strings.TrimSpace(lines[i])
			}
			if strings.Contains(text, "storh ") {
				out = append(out, docCommand{first + 1, text, false})
			}
		}
	}
	return out
}

// newDocRoot returns a fresh command tree, help and completion included.
func newDocRoot() *cobra.Command {
	a := newApp(context.Background(), strings.NewReader(""), nil, nil, func(string) string { return "" })
	return a.rootCmd()
}

// checkCommandLine checks every storh command of a shell line, those in
// $(...) and <(...) included.
func checkCommandLine(line string) error {
	segments, nested := shellWords(line)
	for _, n := range nested {
		if err := checkCommandLine(n); err != nil {
			return err
		}
	}
	for _, words := range segments {
		for len(words) > 0 && isAssignment(words[0]) {
			words = words[1:]
		}
		var args []string
		switch {
		case len(words) > 0 && words[0] == "storh":
			args = words[1:]
		case len(words) > 2 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/storh":
			args = words[3:]
		default:
			continue
		}
		root := newDocRoot()
		c, rest, err := root.Find(args)
		if err != nil {
			return err
		}
		c.InitDefaultHelpFlag()
		if err := c.ParseFlags(rest); err != nil {
			return fmt.Errorf("%s: %w", c.CommandPath(), err)
		}
		if c.HasSubCommands() && len(c.Flags().Args()) > 0 {
			// A command that groups others (storh queue) takes no arguments.
			return fmt.Errorf("%s has no command %q", c.CommandPath(), c.Flags().Args()[0])
		}
		if err := c.ValidateArgs(c.Flags().Args()); err != nil {
			return fmt.Errorf("%s: %w", c.CommandPath(), err)
		}
	}
	return nil
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func isAssignment(w string) bool { return assignment.MatchString(w) }

// placeholder matches a synopsis's stand-ins for arguments (COLL, ID...,
// HOST:PORT, 1..100, <TAB>).
var placeholder = regexp.MustCompile(`^(<[A-Z]+>|[A-Z0-9][A-Z0-9:.|_-]*(\.\.\.)?)$`)

// checkSynopsis checks a synopsis: its words down to the first argument
// are commands (a|b: each of them), and every flag it names exists on the
// command it reaches.
func checkSynopsis(text string) error {
	words := strings.Fields(strings.NewReplacer("[", " ", "]", " ").Replace(text))
	c := newDocRoot()
	descending := true
	for i := 1; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, "-") {
			f, err := lookupFlag(c, w)
			if err != nil {
				return err
			}
			if f.NoOptDefVal == "" && !strings.Contains(w, "=") {
				i++ // its value
			}
			continue
		}
		if !descending || placeholder.MatchString(w) {
			descending = false
			continue
		}
		var next *cobra.Command
		for _, alt := range strings.Split(w, "|") {
			sub := findSub(c, alt)
			switch {
			case sub == nil && c.HasSubCommands():
				return fmt.Errorf("%s has no command %q", c.CommandPath(), alt)
			case sub == nil:
				descending = false
			case next == nil:
				next = sub
			}
		}
		if next != nil && !strings.Contains(w, "|") {
			c = next
		}
	}
	return nil
}

func findSub(c *cobra.Command, name string) *cobra.Command {
	for _, sub := range c.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// lookupFlag finds a flag given as --name, --name=value or -x on c or its
// parents.
func lookupFlag(c *cobra.Command, w string) (*pflag.Flag, error) {
	c.InitDefaultHelpFlag()
	name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
	if strings.HasPrefix(w, "--") {
		if f := c.Flag(name); f != nil {
			return f, nil
		}
	} else if len(name) == 1 {
		for p := c; p != nil; p = p.Parent() {
			if f := p.Flags().ShorthandLookup(name); f != nil {
				return f, nil
			}
			if f := p.PersistentFlags().ShorthandLookup(name); f != nil {
				return f, nil
			}
		}
	}
	return nil, fmt.Errorf("%s has no flag %s", c.CommandPath(), w)
}

// shellWords splits a shell line into the words of its commands (split at
// |, ||, &&, ;), as sh would after quote removal, without redirections and
// comments; nested returns the text of each $(...) and <(...), which stand
// in their word as "X".
func shellWords(line string) (segments [][]string, nested []string) {
	var words []string
	var word strings.Builder
	inWord, dropNext := false, false
	endWord := func() {
		if inWord {
			if dropNext {
				dropNext = false
			} else {
				words = append(words, word.String())
			}
		}
		word.Reset()
		inWord = false
	}
	endSegment := func() {
		endWord()
		if len(words) > 0 {
			segments = append(segments, words)
		}
		words = nil
	}
	// substitution reads $( or <( at i; it returns the index after ).
	substitution := func(i int) int {
		depth, j := 0, i+1
		for ; j < len(line); j++ {
			if line[j] == '(' {
				depth++
			} else if line[j] == ')' {
				if depth--; depth == 0 {
					break
				}
			}
		}
		nested = append(nested, line[i+2:min(j, len(line))])
		word.WriteString("X")
		inWord = true
		return j + 1
	}
	for i := 0; i < len(line); {
		ch := line[i]
		switch {
		case ch == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				end = len(line) - i - 1
			}
			word.WriteString(line[i+1 : i+1+end])
			inWord = true
			i += end + 2
		case ch == '"':
			i++
			for i < len(line) && line[i] != '"' {
				switch {
				case line[i] == '\\' && i+1 < len(line):
					word.WriteByte(line[i+1])
					i += 2
				case strings.HasPrefix(line[i:], "$("):
					i = substitution(i)
				default:
					word.WriteByte(line[i])
					i++
				}
			}
			inWord = true
			i++
		case ch == '\\' && i+1 < len(line):
			word.WriteByte(line[i+1])
			inWord = true
			i += 2
		case strings.HasPrefix(line[i:], "$("), strings.HasPrefix(line[i:], "<("):
			i = substitution(i)
		case ch == ' ' || ch == '\t':
			endWord()
			i++
		case ch == '#' && !inWord:
			endSegment()
			return segments, nested
		case ch == '|' || ch == '&' || ch == ';':
			endSegment()
			i++
			if i < len(line) && (line[i] == '|' || line[i] == '&') {
				i++
			}
		case ch == '>' || ch == '<':
			if inWord && strings.Trim(word.String(), "0123456789") == "" {
				word.Reset() // the 2 of 2>
				inWord = false
			}
			endWord()
			i++
			for i < len(line) && (line[i] == '>' || line[i] == '&') {
				i++
			}
			dropNext = true // the redirection's target
		default:
			word.WriteByte(ch)
			inWord = true
			i++
		}
	}
	endSegment()
	return segments, nested
}
