package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed
	exitUsage = 2 // the command was called wrongly
)

const (
	defaultDB   = "storh.db"
	envDB       = "STORH_DB"
	errorPrefix = "storh: "
)

// usageError marks a mistake in how a command was called (bad flag value,
// wrong arguments, malformed --where or time): exit code 2 and a pointer to
// --help.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// app is one run of the command: its streams, environment and global flags.
// Tests build their own to run commands in-process.
type app struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	now    func() time.Time

	// global flags
	dbPath  string
	jsonOut bool
	timeout time.Duration
	quiet   bool
	// url is the server of --url or $STORH_URL (resolveURL): the command
	// runs over HTTP when it is set; token is --token's bearer token.
	url        string
	token      string
	tokenGiven bool

	// started is set once a command's own code runs: an error before that
	// comes from cobra's parsing and is a usage error.
	started bool
	// dbGiven is set when --db was on the command line.
	dbGiven bool
	// newFile is set when open created the database file, so a command
	// that then fails having written nothing can remove it (removeIfNew).
	newFile bool
}

func newApp(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *app {
	return &app{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, now: time.Now}
}

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := newApp(ctx, stdin, stdout, stderr, getenv)
	root := a.rootCmd()
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	return a.report(cmd, err)
}

// report prints err once, prefixed "storh: ", and maps it to an exit code.
func (a *app) report(cmd *cobra.Command, err error) int {
	msg := cliWords(shortenNames(err.Error(), err))
	if !strings.HasPrefix(msg, errorPrefix) {
		msg = errorPrefix + msg
	}
	fmt.Fprintln(a.stderr, msg)
	var ue usageError
	if errors.As(err, &ue) || !a.started {
		fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return exitUsage
	}
	return exitError
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "storh",
		Short: "Embedded record store keyed by UUIDv7: inspect, query, import, export, maintain",
		Long: `storh works with storh-go database files: one bbolt file holding named
collections of records keyed by UUIDv7, whose ids sort by creation time.

Start with 'storh demo'. Records are printed as JSON lines
  {"id":"…","time":"RFC 3339, ms","data":{…}}
on stdout; diagnostics and progress go to stderr.
Exit codes: 0 ok, 1 the command failed, 2 the command was called wrongly.

The database is storh.db in the current directory, or --db PATH, or
$STORH_DB. docs/cli.md describes every command with examples.`,
		Example: `  storh demo                               # a tour, in storh.db
  storh put pages '{"slug":"home","title":"Home"}'
  storh query pages --limit 10
  storh import --mongo users users.json
  storh --db app.db stats`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: a.preRun,
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	def := defaultDB
	if v := a.getenv(envDB); v != "" {
		def = v
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.dbPath, "db", def, "database file (env "+envDB+")")
	pf.BoolVar(&a.jsonOut, "json", false, "print results as JSON where they are not JSON already")
	pf.DurationVar(&a.timeout, "timeout", storhDefaultLockTimeout, "how long to wait for a database locked by another process")
	pf.BoolVarP(&a.quiet, "quiet", "q", false, "no progress bars or notes on stderr (errors are still printed)")
	pf.StringVar(&a.url, "url", "", "work over HTTP against the storh API at `URL` (a running app's handler or 'storh serve'; env "+envURL+")")
	pf.StringVar(&a.token, "token", "", "bearer token for --url (default $"+envToken+")")

	root.AddGroup(
		&cobra.Group{ID: "start", Title: "Getting started:"},
		&cobra.Group{ID: "data", Title: "Records:"},
		&cobra.Group{ID: "bulk", Title: "Bulk data:"},
		&cobra.Group{ID: "maint", Title: "Maintenance:"},
		&cobra.Group{ID: "ids", Title: "Ids:"},
		&cobra.Group{ID: "http", Title: "HTTP:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add("start", a.demoCmd(), a.versionCmd())
	add("data", a.putCmd(), a.getCmd(), a.patchCmd(), a.deleteCmd(), a.countCmd(), a.aggregateCmd(), a.queryCmd(), a.explainCmd(), a.tailCmd(), a.changesCmd(), a.dropCmd(), a.retainCmd(), a.indexCmd(), a.schemaCmd(), a.queueCmd())
	add("bulk", a.exportCmd(), a.importCmd(), a.migrateCmd())
	add("maint", a.statsCmd(), a.verifyCmd(), a.repairCmd(), a.compactCmd(), a.backupCmd())
	add("ids", a.uuidCmd(), a.objectidCmd())
	add("http", a.serveCmd())
	root.SetHelpCommandGroupID("start")
	root.SetCompletionCommandGroupID("start")
	helpTexts(root)
	for _, c := range root.Commands() {
		if collArgs[c.Name()] != 0 {
			c.ValidArgsFunction = a.completeColl(collArgs[c.Name()])
		}
	}
	return root
}

// helpTexts gives cobra's own commands, help and completion, examples like
// every other command's.
func helpTexts(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	examples := map[string]string{
		"help": `  storh help import
  storh import --help`,
		"completion": `  source <(storh completion bash)
  storh completion zsh > "${fpath[1]}/_storh"`,
		"completion bash":       `  source <(storh completion bash)`,
		"completion zsh":        `  storh completion zsh > "${fpath[1]}/_storh"`,
		"completion fish":       `  storh completion fish | source`,
		"completion powershell": `  storh completion powershell | Out-String | Invoke-Expression`,
	}
	for _, c := range root.Commands() {
		if ex, ok := examples[c.Name()]; ok {
			c.Example = ex
		}
		for _, sub := range c.Commands() {
			if ex, ok := examples[c.Name()+" "+sub.Name()]; ok {
				sub.Example = ex
			}
		}
	}
}

// collArgs says which commands take collection names, and how many of their
// leading arguments are collections (-1: all); what follows is a file for
// import and export.
var collArgs = map[string]int{
	"put": 1, "get": 1, "delete": 1, "count": 1, "query": 1, "explain": 1, "tail": 1, "changes": 1, "export": 1, "import": 1,
	"drop": -1, "stats": 1, "verify": -1, "repair": -1, "retain": 1,
}

// completeColl completes collection names from the database, for shell
// completion: storh query <TAB>.
func (a *app) completeColl(n int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if n >= 0 && len(args) >= n {
			if name := cmd.Name(); name == "import" || name == "export" {
				return nil, cobra.ShellCompDirectiveDefault // a file
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		db, err := storh.Open(a.dbPath, storh.WithReadOnly(), storh.WithLockTimeout(100*time.Millisecond))
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer db.Close()
		st, err := db.Stats()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, c := range st.Collections {
			out = append(out, cobra.CompletionWithDesc(c.Name, fmt.Sprintf("%s, %s", c.Kind, plural(c.Records, "record"))))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// storhDefaultLockTimeout mirrors the library's default, shown in --help.
const storhDefaultLockTimeout = time.Second

func (a *app) preRun(cmd *cobra.Command, args []string) error {
	a.started = true
	if f := cmd.Flag("db"); f != nil {
		a.dbGiven = f.Changed
	}
	if a.timeout <= 0 {
		return usagef("--timeout %v: the lock timeout must be positive", a.timeout)
	}
	top := cmd
	for top.HasParent() && top.Parent() != cmd.Root() {
		top = top.Parent()
	}
	urlGiven := false
	if f := cmd.Flag("url"); f != nil {
		urlGiven = f.Changed
	}
	if f := cmd.Flag("token"); f != nil && cmd.Name() != "serve" {
		a.tokenGiven = f.Changed
	}
	name := top.Name()
	if top != cmd {
		name += " " + cmd.Name()
	}
	if err := a.resolveURL(name, urlGiven); err != nil {
		return err
	}
	if n, ok := collArgs[cmd.Name()]; ok && cmd.Parent() == cmd.Root() {
		if n >= 0 && n < len(args) {
			args = args[:n]
		}
		return checkCollNames(args)
	}
	return nil
}

// args checks the number of positional arguments; the message names what
// is missing from the command's Use line.
func args(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		want := strings.TrimSpace(strings.TrimPrefix(cmd.Use, cmd.Name()))
		switch {
		case len(args) < min:
			return usagef("missing arguments: %s needs %s", cmd.CommandPath(), want)
		case max >= 0 && len(args) > max:
			return usagef("too many arguments: %s takes %s, got %d (%s)", cmd.CommandPath(), want, len(args), quoteArgs(args))
		}
		return nil
	}
}

func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, s := range args {
		if len(s) > 40 {
			s = s[:37] + "..."
		}
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, " ")
}

// diag prints a note on stderr unless --quiet.
func (a *app) diag(format string, args ...any) {
	if !a.quiet {
		fmt.Fprintf(a.stderr, format+"\n", args...)
	}
}

// printJSON prints v as one line of JSON on stdout.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// stderrIsTerminal decides whether progress bars are drawn.
func (a *app) stderrIsTerminal() bool {
	f, ok := a.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// open opens the database: read-only (a shared lock, so reads run beside
// each other) unless write. A postgres:// or postgresql:// URL opens that
// server's store, where there is no file to check and no file lock to wait
// for (--timeout does not apply).
func (a *app) open(write bool) (*storh.DB, error) {
	if isURL(a.dbPath) {
		var opts []storh.Option
		if !write {
			opts = append(opts, storh.WithReadOnly())
		}
		db, err := storh.Open(a.dbPath, opts...)
		if err != nil {
			return nil, a.openError(err)
		}
		return db, nil
	}
	opts := []storh.Option{storh.WithLockTimeout(a.timeout)}
	if !write {
		fi, err := os.Stat(a.dbPath)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("no database at %s: pass --db PATH or set %s, or create one with 'storh demo' or 'storh put'", a.dbPath, envDB)
		case err == nil && fi.Mode().IsRegular() && fi.Size() == 0:
			return nil, fmt.Errorf("%s is an empty file, not a database: remove it, or let a command that writes (storh put, storh import) make it one", a.dbPath)
		}
		opts = append(opts, storh.WithReadOnly())
	} else if _, err := os.Lstat(a.dbPath); errors.Is(err, os.ErrNotExist) {
		a.newFile = true
	}
	db, err := storh.Open(a.dbPath, opts...)
	if errors.Is(err, storh.ErrLocked) {
		return nil, a.lockedError(err)
	}
	if err != nil {
		return nil, a.openError(err)
	}
	return db, nil
}

// lockedError says who keeps the database file locked, as the library
// found it (a process that has it open for writing, or processes that have
// it open read-only), and what to do; it is storh.ErrLocked for errors.Is.
func (a *app) lockedError(err error) error {
	hint := "close it, or wait longer with --timeout"
	var se *storh.Error
	if errors.As(err, &se) && se.Hint != "" {
		hint = se.Hint
	}
	return lockedError(fmt.Sprintf("database %s is locked (waited %v): %s; %s", a.dbPath, a.timeout, reason(err), hint))
}

// lockedError is a locked database in the command's words.
type lockedError string

func (e lockedError) Error() string { return string(e) }
func (e lockedError) Unwrap() error { return storh.ErrLocked }

// reader is a collection a command reads: a *storh.Docs or *storh.Log.
type reader = storh.Collection

// writer is a collection a command writes: a *storh.Docs or *storh.Log.
type writer = storh.Collection

// lookup returns the statistics of an existing collection, or an error
// naming the collections there are. Reads never create collections.
func (a *app) lookup(db *storh.DB, name string) (storh.CollectionInfo, error) {
	st, err := db.Stats()
	if err != nil {
		return storh.CollectionInfo{}, err
	}
	return a.lookupIn(st.Collections, name, a.dbPath)
}

// lookupIn finds the collection name among cs, the collections of the
// database at where, or says which there are.
func (a *app) lookupIn(cs []storh.CollectionInfo, name, where string) (storh.CollectionInfo, error) {
	names := make([]string, 0, len(cs))
	for _, c := range cs {
		if c.Name == name {
			return c, nil
		}
		names = append(names, c.Name)
	}
	for i, n := range names {
		if len(n) > nameShown {
			names[i] = qname(n)
		}
	}
	have := "it has no collections yet"
	switch {
	case len(names) > 8:
		have = "it has " + strings.Join(names[:8], ", ") + fmt.Sprintf(" and %d more; 'storh stats' lists them", len(names)-8)
	case len(names) > 0:
		have = "it has " + strings.Join(names, ", ")
	}
	return storh.CollectionInfo{}, fmt.Errorf("collection %s does not exist in %s (%s)", qname(name), where, have)
}

// reader opens an existing collection with its own kind.
func (a *app) reader(db *storh.DB, name string) (reader, storh.CollectionInfo, error) {
	cs, err := a.lookup(db, name)
	if err != nil {
		return nil, cs, err
	}
	var r reader
	switch cs.Kind {
	case "docs":
		r, err = db.Docs(name)
	case "log":
		r, err = db.Log(name)
	default:
		return nil, cs, fmt.Errorf("collection %s is a %s: use 'storh queue' (storh queue stats %s)", qname(name), cs.Kind, shellQuote(name))
	}
	return r, cs, err
}

// openExisting opens the database and checks that each named collection
// exists, so a misspelt name fails before any work; it returns their
// statistics in the order named. The caller closes the database; on error
// nothing is left open.
func (a *app) openExisting(write bool, names ...string) (*storh.DB, []storh.CollectionInfo, error) {
	if _, err := os.Stat(a.dbPath); write && !isURL(a.dbPath) && errors.Is(err, os.ErrNotExist) {
		// open(true) would create the file, only to find no collection.
		return nil, nil, fmt.Errorf("no database at %s: pass --db PATH or set %s", a.dbPath, envDB)
	}
	db, err := a.open(write)
	if err != nil {
		return nil, nil, err
	}
	found := make([]storh.CollectionInfo, 0, len(names))
	for _, name := range names {
		cs, err := a.lookup(db, name)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		found = append(found, cs)
	}
	return db, found, nil
}

// openReader opens the database read-only and an existing collection for
// reading. The caller closes the database; on error nothing is left open.
func (a *app) openReader(name string) (*storh.DB, reader, storh.CollectionInfo, error) {
	db, err := a.open(false)
	if err != nil {
		return nil, nil, storh.CollectionInfo{}, err
	}
	r, cs, err := a.reader(db, name)
	if err != nil {
		db.Close()
		return nil, nil, cs, err
	}
	return db, r, cs, nil
}

// writer opens a collection for writing with its own kind, creating it as
// a log when asLog, else as docs, when it does not exist (created reports
// that, so a command that then fails can take it back).
func (a *app) writer(db *storh.DB, name string, asLog bool) (w writer, kind string, created bool, err error) {
	st, err := db.Stats()
	if err != nil {
		return nil, "", false, err
	}
	for _, c := range st.Collections {
		if c.Name == name {
			kind = c.Kind
		}
	}
	switch {
	case kind == "docs" && asLog:
		return nil, kind, false, fmt.Errorf("collection %s is a docs collection, not a log: drop --log, or choose another name", qname(name))
	case kind == "queue":
		return nil, kind, false, fmt.Errorf("collection %s is a queue: use 'storh queue enqueue'", qname(name))
	case kind == "":
		created, kind = true, "docs"
		if asLog {
			kind = "log"
		}
	}
	if kind == "log" {
		w, err = db.Log(name)
	} else {
		w, err = db.Docs(name)
	}
	return w, kind, created, err
}

// removeIfNew closes db and removes its file when this command created the
// file and it holds no collection: a failed first import or put into a new
// path leaves no 16 MiB empty database behind. It reports whether it did;
// db is closed then. A file that existed before is never removed.
func (a *app) removeIfNew(db *storh.DB) bool {
	if !a.newFile {
		return false
	}
	st, err := db.Stats()
	if err != nil || len(st.Collections) > 0 {
		return false
	}
	if runtime.GOOS == "windows" {
		// An open file cannot be removed there.
		db.Close()
		return os.Remove(a.dbPath) == nil
	}
	// Elsewhere remove it while still holding its lock, so no other
	// process can open and write it between the close and the removal.
	err = os.Remove(a.dbPath)
	db.Close()
	return err == nil
}

// dropIfEmpty removes a collection this command created when nothing was
// written to it, so a failed first write leaves no trace.
func dropIfEmpty(db *storh.DB, name string, created bool) {
	if !created {
		return
	}
	st, err := db.Stats()
	if err != nil {
		return
	}
	for _, c := range st.Collections {
		if c.Name == name && c.Records == 0 {
			db.Drop(name)
		}
	}
}

// recordPrinter writes records as JSON lines to stdout.
type recordPrinter struct {
	w   *bufio.Writer
	buf []byte
	n   int
}

func (a *app) newPrinter() *recordPrinter {
	return &recordPrinter{w: bufio.NewWriterSize(a.stdout, 64<<10)}
}

func (p *recordPrinter) print(rec storh.Record) error {
	var err error
	p.buf, err = jsonl.AppendRecord(p.buf[:0], rec.ID, rec.Raw())
	if err != nil {
		return fmt.Errorf("record %s: %w", rec.ID, err)
	}
	p.n++
	_, err = p.w.Write(p.buf)
	return err
}

// printLine writes a record's line as a store gives it.
func (p *recordPrinter) printLine(line []byte) error {
	p.n++
	_, err := p.w.Write(line)
	return err
}

func (p *recordPrinter) flush() error { return p.w.Flush() }

// parseID reads an id argument; a malformed one is a usage error.
func parseID(what, s string) (uuidv7.UUID, error) {
	id, err := uuidv7.Parse(s)
	if err != nil {
		return id, usagef("%s: %s", what, strings.TrimPrefix(err.Error(), "uuidv7: "))
	}
	return id, nil
}

// humanBytes formats a size in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// plural formats a count with its noun: 1 record, 2 records.
func plural[N ~int | ~int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return commas(n) + " " + noun + "s"
}

// commas formats an integer with thousands separators.
func commas[N ~int | ~int64](n N) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// libMsg strips the "storh: " prefix a library error starts with, for
// errors that are quoted inside one of ours.
func libMsg(err error) string {
	msg := cliWords(shortenNames(err.Error(), err))
	return strings.TrimPrefix(strings.TrimPrefix(msg, errorPrefix), "jsonl: ")
}
