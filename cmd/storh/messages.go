package main

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/storhdb/storh-go/storh"
)

// Messages speak the command's language: they name flags and commands, not
// the library's options and methods, and they stay short enough to read
// whatever the user typed.

// nameShown is the longest collection name a message shows whole; longer
// ones are cut, with their length.
const nameShown = 64

// qname quotes a collection name for a message, cut to its first 48 bytes
// (on a character boundary) when it is longer than nameShown:
// "xxxx…" (10,000 bytes).
func qname(name string) string {
	if len(name) <= nameShown {
		return strconv.Quote(name)
	}
	cut := 48
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return fmt.Sprintf("%s (%s bytes)", strconv.Quote(name[:cut]+"…"), commas(int64(len(name))))
}

// checkCollNames refuses collection-name arguments longer than the library
// allows before any work, in a message that does not echo them whole.
func checkCollNames(names []string) error {
	for _, name := range names {
		if len(name) > storh.MaxNameLength {
			return usagef("collection name %s is too long: the limit is %d bytes", qname(name), storh.MaxNameLength)
		}
	}
	return nil
}

// libraryWords rewrites what the library says in terms of its Go API
// (options, methods, transactions) into the command's terms. The library's
// hints are written for programmers; the command's users pass flags.
var libraryWords = []struct {
	re  *regexp.Regexp
	cli string
}{
	{regexp.MustCompile(`open it once without WithReadOnly to create the database`),
		"an empty file is not a database: remove it, or let a command that writes (storh put, storh import) make it one"},
	{regexp.MustCompile(`writes need a database opened without WithReadOnly, and go inside Update, not View`),
		"this command opened the database only for reading"},
	{regexp.MustCompile(`inside Update/View use the handles from tx\.Docs and tx\.Log`),
		"an error in the storh command itself; please report it"},
	{regexp.MustCompile(`the size limit set with WithMaxSize is reached`),
		"the database's size limit is reached"},
	{regexp.MustCompile(`open the database with WithReadOnly`),
		"only the commands that read (get, count, query, export, stats, verify, backup) work on it"},
	{regexp.MustCompile(`open it with db\.(Docs|Log|Queue)\("(?:[^"\\]|\\.)*"\)`),
		"'storh stats' shows the kind of each collection"},
	{regexp.MustCompile(`, or another Open in this one,`), ""},
	{regexp.MustCompile(`, or other Opens in this one,`), ""},
	{regexp.MustCompile(`raise the lock timeout`), "wait longer with --timeout"},
}

// cliWords rewrites a message's library terms into the command's.
func cliWords(msg string) string {
	for _, w := range libraryWords {
		msg = w.re.ReplaceAllString(msg, w.cli)
	}
	return msg
}

// shortenNames cuts the collection name a library error quotes, when it is
// too long to show whole.
func shortenNames(msg string, err error) string {
	var se *storh.Error
	if errors.As(err, &se) && len(se.Collection) > nameShown {
		msg = strings.ReplaceAll(msg, strconv.Quote(se.Collection), qname(se.Collection))
	}
	return msg
}

// openError says why the database file cannot be opened, in the command's
// terms: the path once, the reason, and what to do.
func (a *app) openError(err error) error {
	var se *storh.Error
	if !errors.As(err, &se) || se.Op != "open" || se.Err == nil {
		return err
	}
	reason := se.Err.Error()
	var pe *fs.PathError
	if errors.As(se.Err, &pe) {
		reason = pe.Err.Error() // "is a directory", not "open PATH: is a directory" again
	}
	reason = strings.TrimPrefix(reason, errorPrefix)
	hint := se.Hint
	switch {
	case errors.Is(err, storh.ErrCorrupt) && strings.Contains(reason, "damaged"):
		hint = "restore it from a backup"
	case errors.Is(err, storh.ErrCorrupt):
		hint = "the file is damaged or is not a storh database: restore it from a backup"
	case errors.Is(err, fs.ErrPermission):
		hint = "check the permissions of the file and its directory"
	}
	msg := fmt.Sprintf("cannot open the database %s: %s", storh.Redact(a.dbPath), reason)
	if hint != "" {
		msg += " (" + hint + ")"
	}
	return errors.New(cliWords(msg))
}
